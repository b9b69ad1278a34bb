// A bounded per-volume timeline, so that a broken invariant comes with the
// story of the objects behind it instead of a bare count: VolumeAttachment
// and PV changes (from the watchdog) and the CSI driver's publish, unpublish,
// create and delete calls with their outcome and the volume's published nodes
// right after (from a wrapper around the in-process driver), and its expand
// and modify calls.
import type { CsiDriver, CsiMethodName, CsiRequest, CsiResponse } from "../../sandbox/csi/driver.ts";

const maxEntriesPerKey = 40;
const maxKeys = 20_000;

export class Trace {
  private readonly started = Date.now();
  private readonly entries = new Map<string, string[]>();
  /** volume handle -> PV name, so driver calls land on the PV's timeline. */
  private readonly pvOfHandle = new Map<string, string>();

  notePvHandle(pv: string, handle: string): void {
    this.pvOfHandle.set(handle, pv);
  }

  keyOfHandle(handle: string): string {
    return this.pvOfHandle.get(handle) ?? handle;
  }

  add(key: string, what: string): void {
    let list = this.entries.get(key);
    if (!list) {
      if (this.entries.size >= maxKeys) return;
      list = [];
      this.entries.set(key, list);
    }
    list.push(`+${Date.now() - this.started}ms ${what}`);
    if (list.length > maxEntriesPerKey) list.shift();
  }

  of(key: string): string[] {
    return [...(this.entries.get(key) ?? [])];
  }

  /**
   * Records the driver's volume calls; returns a function that undoes the
   * wrapping. `afterResize` hears of every create and expand call, failed ones
   * included (an injected error may come after the work), once it returned.
   */
  wrapDriver(driver: CsiDriver, afterResize?: (volumeId: string) => void): () => void {
    const original = driver.invoke;
    const invoke = original.bind(driver);
    const traced = new Set<CsiMethodName>([
      "CreateVolume",
      "DeleteVolume",
      "ControllerPublishVolume",
      "ControllerUnpublishVolume",
      "ControllerExpandVolume",
      "ControllerModifyVolume",
      "NodeExpandVolume",
    ]);
    const sizing = new Set<CsiMethodName>(["CreateVolume", "ControllerExpandVolume", "NodeExpandVolume"]);
    // Every argument passes through: a Node-service call names the node whose plugin received it.
    driver.invoke = async <M extends CsiMethodName>(
      method: M,
      request: CsiRequest<M>,
      node?: string,
    ): Promise<CsiResponse<M>> => {
      if (!traced.has(method)) return invoke(method, request, node);
      const r = request as {
        volumeId?: string;
        nodeId?: string;
        name?: string;
        capacityRange?: { requiredBytes?: bigint | number | string };
        mutableParameters?: Record<string, string>;
      };
      const required = r.capacityRange?.requiredBytes;
      const params = r.mutableParameters ? ` ${JSON.stringify(r.mutableParameters)}` : "";
      const what = `${method}${r.nodeId ? ` node ${r.nodeId}` : ""}${required !== undefined ? ` to ${required}` : ""}${params}`;
      const after = (id: string | undefined): void => {
        if (afterResize && id && sizing.has(method)) afterResize(id);
      };
      const keyOf = (id: string | undefined): string => (id ? this.keyOfHandle(id) : `name:${r.name}`);
      try {
        const response = await invoke(method, request, node);
        const id = r.volumeId ?? (response as { volume?: { volumeId?: string } }).volume?.volumeId;
        this.add(keyOf(id), `${what} ok; published on [${id ? driver.publishedNodes(id).join(",") : ""}]`);
        after(id);
        return response;
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        const id = r.volumeId;
        this.add(
          keyOf(id),
          `${what} failed (${message.slice(0, 80)}); published on [${id ? driver.publishedNodes(id).join(",") : ""}]`,
        );
        after(id);
        throw err;
      }
    };
    return () => {
      driver.invoke = original;
    };
  }
}
