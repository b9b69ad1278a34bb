// Volume expansion and VolumeAttributesClass end to end (issue 18): every
// function as its own process on the sandbox cluster (sandbox/system.ts). A
// claim used by a running pod grows from 1Gi to 2Gi (resizer: ControllerExpand
// Volume; kubelet: NodeExpandVolume online); an expansion past the driver's
// maximum volume size is infeasible and recovers when the user lowers the
// request; a VolumeAttributesClass change reaches the driver, and an infeasible
// one is reported and rolled back. Throughout, no claim or PV capacity ever
// goes down (seen on the API server's change feed).
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { StoredChange } from "../../sandbox/apiserver/store.ts";
import type { BackingVolume } from "../../sandbox/csi/driver.ts";
import { type RunningSystem, startSystem } from "../../sandbox/system.ts";
import { parseQuantityBytes } from "../../shared/kube/quantity.ts";
import {
  events,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  storageClasses,
  volumeAttributesClasses,
} from "../../shared/kube/resources.ts";
import type {
  KubeEvent,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  VolumeAttributesClass,
} from "../../shared/kube/types.ts";
import { waitFor } from "../helpers/wait-for.ts";

const ns = "default";
const GiB = 1024 ** 3;
/** The sandbox driver's default maximum volume size (sandbox/csi/config.ts): 1 TiB. */
const tooBig = "2Ti";

function claim(name: string, o: { vac?: string; block?: boolean } = {}): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: ns },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      storageClassName: "expandable",
      ...(o.vac ? { volumeAttributesClassName: o.vac } : {}),
      ...(o.block ? { volumeMode: "Block" } : {}),
    },
  };
}

function pod(name: string, claimName: string): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: ns },
    spec: {
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
    },
  };
}

const bytes = (q: string | undefined): number => (q === undefined ? 0 : Number(parseQuantityBytes(q)));

describe("volume expansion and VolumeAttributesClass, end to end over the sandbox", () => {
  let dir: string;
  let system: RunningSystem;
  let driver: string;
  /** Every capacity a claim's status or a PV's spec went from → to, by object. */
  const shrinks: string[] = [];
  const lastCapacity = new Map<string, number>();
  let unsubscribe: (() => void) | undefined;

  const getClaim = (name: string) => system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, ns);
  const getVolume = (name: string) => system.kube.get<PersistentVolume>(persistentVolumes, name);
  const patchClaim = (name: string, spec: object) =>
    system.kube.patch<PersistentVolumeClaim>(persistentVolumeClaims, name, ns, { spec }, "merge");
  const backing = async (volumeId: string): Promise<BackingVolume> => {
    const res = await fetch(`${system.sandbox.csi.adminUrl}/volumes`);
    const { volumes } = (await res.json()) as { volumes: BackingVolume[] };
    const v = volumes.find((x) => x.volumeId === volumeId);
    assert.ok(v, `backing volume ${volumeId}`);
    return v;
  };
  /** The Events about one object, oldest first, as `type reason: message`, with their source. */
  const eventsOf = async (uid: string): Promise<{ line: string; source: string }[]> => {
    const list = await system.kube.list<KubeEvent>(events, { namespace: ns });
    return list.items
      .filter((e) => e.involvedObject.uid === uid)
      .sort((a, b) => Number(a.metadata.resourceVersion) - Number(b.metadata.resourceVersion))
      .map((e) => ({
        line: `${e.type} ${e.reason}: ${e.message}`,
        // core/v1 Event.source, not in our KubeEvent type.
        source: (e as { source?: { component?: string } }).source?.component ?? "",
      }));
  };
  const reasonsOf = async (uid: string): Promise<string[]> =>
    (await eventsOf(uid)).map((e) => e.line.slice(0, e.line.indexOf(":")));

  /** A claim of class "expandable" and a pod using it, Running. */
  async function inUse(
    name: string,
    o: { vac?: string; block?: boolean } = {},
  ): Promise<{ claim: PersistentVolumeClaim; pv: PersistentVolume }> {
    await system.kube.create(persistentVolumeClaims, claim(name, o));
    await runPod(`${name}-user`, name);
    const c = await getClaim(name);
    return { claim: c, pv: await getVolume(c.spec.volumeName ?? "") };
  }

  async function runPod(name: string, claimName: string): Promise<void> {
    await system.kube.create(pods, pod(name, claimName));
    await waitFor(`pod ${name} Running`, async () => {
      const p = await system.kube.get<Pod>(pods, name, ns);
      return p.status?.phase === "Running" ? true : undefined;
    });
  }

  /** Waits until the claim's expansion has settled at `size` (capacity, no statuses, no conditions). */
  const settledAt = (name: string, size: string) =>
    waitFor(`claim ${name} at ${size}`, async () => {
      const c = await getClaim(name);
      const s = c.status;
      return s?.capacity?.storage === size &&
        s.allocatedResourceStatuses?.storage === undefined &&
        (s.conditions ?? []).length === 0
        ? c
        : undefined;
    });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ksf-resize-"));
    system = await startSystem({
      dir,
      resyncSeconds: 2,
      logLevel: "error",
      // Quick retries; an infeasible target waits the max, which a lowered request skips.
      env: { RETRY_INTERVAL_START_SECONDS: "1", RETRY_INTERVAL_MAX_SECONDS: "5" },
    });
    driver = system.driverName;
    unsubscribe = system.sandbox.apiServer.store.subscribe((c: StoredChange) => {
      if (c.type === "DELETED") return;
      const o = c.object as PersistentVolumeClaim | PersistentVolume;
      let q: string | undefined;
      if (c.resource.plural === "persistentvolumeclaims")
        q = (o as PersistentVolumeClaim).status?.capacity?.storage;
      else if (c.resource.plural === "persistentvolumes") q = (o as PersistentVolume).spec.capacity?.storage;
      else return;
      if (q === undefined) return;
      const id = `${c.resource.plural}/${o.metadata.name}`;
      const was = lastCapacity.get(id);
      if (was !== undefined && bytes(q) < was) shrinks.push(`${id}: ${was} → ${q}`);
      lastCapacity.set(id, bytes(q));
    });
    await system.kube.create(storageClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "expandable" },
      provisioner: driver,
      reclaimPolicy: "Delete",
      volumeBindingMode: "WaitForFirstConsumer",
      allowVolumeExpansion: true,
    });
    // The sandbox driver knows tiers standard, premium and archive (sandbox/csi/mutable-parameters.ts).
    for (const [name, tier] of [
      ["tier-a", "standard"],
      ["tier-b", "premium"],
      ["tier-gold", "gold"],
    ] as const) {
      await system.kube.create<VolumeAttributesClass>(volumeAttributesClasses, {
        apiVersion: "storage.k8s.io/v1",
        kind: "VolumeAttributesClass",
        metadata: { name },
        driverName: driver,
        parameters: { tier },
      });
    }
  });

  after(async () => {
    unsubscribe?.();
    await system?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("a 1Gi claim used by a running pod grows to 2Gi: driver, PV and claim, with upstream's Events", async () => {
    const { claim: c, pv } = await inUse("grow");
    const handle = pv.spec.csi?.volumeHandle ?? "";
    assert.equal((await backing(handle)).capacityBytes, GiB);
    await patchClaim("grow", { resources: { requests: { storage: "2Gi" } } });
    const grown = await settledAt("grow", "2Gi");
    assert.equal(grown.status?.allocatedResources?.storage, "2Gi");
    assert.equal(grown.status?.allocatedResourceStatuses, undefined);
    assert.equal((await getVolume(pv.metadata.name)).spec.capacity?.storage, "2Gi");
    const v = await backing(handle);
    assert.equal(v.capacityBytes, 2 * GiB, "controller side");
    assert.equal(v.nodeCapacityBytes, 2 * GiB, "node side (the filesystem)");

    const seen = await eventsOf(c.metadata.uid ?? "");
    const lines = seen.map((e) => e.line);
    const at = (prefix: string): number => lines.findIndex((l) => l.startsWith(prefix));
    const resizing = at(`Normal Resizing: External resizer is resizing volume ${pv.metadata.name}`);
    const required = at("Normal FileSystemResizeRequired: Require file system resize of volume on node");
    const done = at(
      `Normal FileSystemResizeSuccessful: MountVolume.NodeExpandVolume succeeded for volume "${pv.metadata.name}"`,
    );
    assert.ok(resizing >= 0 && required > resizing && done > required, lines.join("\n"));
    assert.equal(seen[resizing]?.source, `external-resizer ${driver}`);
    assert.equal(seen[done]?.source, "kubelet");
    assert.ok(!lines.some((l) => l.startsWith("Warning")), lines.join("\n"));
  });

  it("a block volume needs no node step: the resizer finishes it (VolumeResizeSuccessful)", async () => {
    const { claim: c, pv } = await inUse("raw", { block: true });
    await patchClaim("raw", { resources: { requests: { storage: "2Gi" } } });
    const done = await settledAt("raw", "2Gi");
    assert.equal(done.metadata.annotations?.["volume.kubernetes.io/node-expansion-not-required"], "true");
    assert.equal((await getVolume(pv.metadata.name)).spec.capacity?.storage, "2Gi");
    const v = await backing(pv.spec.csi?.volumeHandle ?? "");
    assert.equal(v.capacityBytes, 2 * GiB);
    // The kubelet may still call NodeExpandVolume for the device and say FileSystemResizeSuccessful,
    // as upstream's does once the claim shows the size (NodeExpander's pvcAlreadyUpdated).
    const resizer = (await eventsOf(c.metadata.uid ?? ""))
      .filter((e) => e.source === `external-resizer ${driver}`)
      .map((e) => e.line);
    assert.deepEqual(resizer, [
      `Normal Resizing: External resizer is resizing volume ${pv.metadata.name}`,
      "Normal VolumeResizeSuccessful: Resize volume succeeded",
    ]);
  });

  it("with no pod the filesystem waits (FileSystemResizePending) and the next pod's mount expands it", async () => {
    const { claim: c, pv } = await inUse("offline");
    await system.kube.delete(pods, "offline-user", ns);
    await waitFor("pod offline-user gone", async () =>
      (await system.kube.list<Pod>(pods, { namespace: ns })).items.some(
        (p) => p.metadata.name === "offline-user",
      )
        ? undefined
        : true,
    );
    await patchClaim("offline", { resources: { requests: { storage: "2Gi" } } });
    const pending = await waitFor("NodeResizePending", async () => {
      const got = await getClaim("offline");
      return got.status?.allocatedResourceStatuses?.storage === "NodeResizePending" ? got : undefined;
    });
    assert.equal(pending.status?.capacity?.storage, "1Gi");
    const fsPending = (pending.status?.conditions ?? []).find((x) => x.type === "FileSystemResizePending");
    assert.equal(
      fsPending?.message,
      "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
    );
    // Nobody mounts it: it stays so (a resync or two later too).
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal((await getClaim("offline")).status?.capacity?.storage, "1Gi");
    const handle = pv.spec.csi?.volumeHandle ?? "";
    assert.equal((await backing(handle)).nodeCapacityBytes, GiB);

    await runPod("offline-user-2", "offline");
    await settledAt("offline", "2Gi");
    assert.equal((await backing(handle)).nodeCapacityBytes, 2 * GiB);
    const reasons = await reasonsOf(c.metadata.uid ?? "");
    assert.ok(reasons.includes("Normal FileSystemResizeSuccessful"), reasons.join("\n"));
  });

  it("an infeasible expansion is reported, then the user lowers the request and the claim recovers", async () => {
    const { claim: c, pv } = await inUse("toobig");
    const handle = pv.spec.csi?.volumeHandle ?? "";
    await patchClaim("toobig", { resources: { requests: { storage: tooBig } } });
    const failed = await waitFor("ControllerResizeInfeasible", async () => {
      const got = await getClaim("toobig");
      return got.status?.allocatedResourceStatuses?.storage === "ControllerResizeInfeasible"
        ? got
        : undefined;
    });
    assert.equal(failed.status?.allocatedResources?.storage, tooBig);
    assert.equal(failed.status?.capacity?.storage, "1Gi");
    const conditions = failed.status?.conditions ?? [];
    const error = conditions.find((x) => x.type === "ControllerResizeError");
    assert.equal(error?.status, "True");
    assert.match(String(error?.message), /^failed to expand pvc with .*OutOfRange/);
    const warning = await waitFor("Warning VolumeResizeFailed", async () =>
      (await eventsOf(c.metadata.uid ?? "")).find((e) => e.line.startsWith("Warning VolumeResizeFailed")),
    );
    assert.match(
      warning.line,
      new RegExp(
        `resize volume "${pv.metadata.name}" by resizer "${driver.replaceAll(".", "\\.")}" failed: rpc error: code = OutOfRange`,
      ),
    );
    assert.equal((await backing(handle)).capacityBytes, GiB, "the driver did not grow it");

    // RecoverVolumeExpansionFailure: back down, but above status.capacity, is allowed.
    await patchClaim("toobig", { resources: { requests: { storage: "3Gi" } } });
    const recovered = await settledAt("toobig", "3Gi");
    assert.equal(recovered.status?.allocatedResources?.storage, "3Gi");
    assert.equal((await getVolume(pv.metadata.name)).spec.capacity?.storage, "3Gi");
    const v = await backing(handle);
    assert.equal(v.capacityBytes, 3 * GiB);
    assert.equal(v.nodeCapacityBytes, 3 * GiB);
  });

  it("a shrink below the claim's capacity is still refused by admission", async () => {
    await assert.rejects(
      patchClaim("grow", { resources: { requests: { storage: "1Gi" } } }),
      (err: unknown) => /Forbidden|forbidden/.test(String(err)),
    );
    assert.equal((await getClaim("grow")).spec.resources?.requests?.storage, "2Gi");
  });

  it("a VolumeAttributesClass change reaches the driver; an infeasible one is reported and rolled back", async () => {
    const { claim: c, pv } = await inUse("tiered", { vac: "tier-a" });
    const handle = pv.spec.csi?.volumeHandle ?? "";
    assert.equal(pv.spec.volumeAttributesClassName, "tier-a");
    assert.deepEqual((await backing(handle)).mutableParameters, { tier: "standard" });
    await waitFor("current class tier-a", async () =>
      (await getClaim("tiered")).status?.currentVolumeAttributesClassName === "tier-a" ? true : undefined,
    );

    await patchClaim("tiered", { volumeAttributesClassName: "tier-b" });
    const modified = await waitFor("current class tier-b", async () => {
      const got = await getClaim("tiered");
      return got.status?.currentVolumeAttributesClassName === "tier-b" && !got.status.modifyVolumeStatus
        ? got
        : undefined;
    });
    assert.deepEqual(modified.status?.conditions ?? [], []);
    assert.equal((await getVolume(pv.metadata.name)).spec.volumeAttributesClassName, "tier-b");
    assert.deepEqual((await backing(handle)).mutableParameters, { tier: "premium" });

    await patchClaim("tiered", { volumeAttributesClassName: "tier-gold" });
    const infeasible = await waitFor("modifyVolumeStatus Infeasible", async () => {
      const got = await getClaim("tiered");
      return got.status?.modifyVolumeStatus?.status === "Infeasible" ? got : undefined;
    });
    assert.equal(infeasible.status?.modifyVolumeStatus?.targetVolumeAttributesClassName, "tier-gold");
    assert.equal(infeasible.status?.currentVolumeAttributesClassName, "tier-b");
    const modifyError = (infeasible.status?.conditions ?? []).find((x) => x.type === "ModifyVolumeError");
    assert.equal(modifyError?.status, "True");
    const failedEvent = await waitFor("Warning VolumeModifyFailed", async () =>
      (await eventsOf(c.metadata.uid ?? "")).find((e) => e.line.startsWith("Warning VolumeModifyFailed")),
    );
    assert.match(failedEvent.line, /InvalidArgument/);
    assert.deepEqual((await backing(handle)).mutableParameters, { tier: "premium" });
    assert.equal((await getVolume(pv.metadata.name)).spec.volumeAttributesClassName, "tier-b");

    // Rolled back: the user points the claim at the class it has.
    await patchClaim("tiered", { volumeAttributesClassName: "tier-b" });
    const back = await waitFor("modifyVolumeStatus cleared", async () => {
      const got = await getClaim("tiered");
      return !got.status?.modifyVolumeStatus && (got.status?.conditions ?? []).length === 0 ? got : undefined;
    });
    assert.equal(back.status?.currentVolumeAttributesClassName, "tier-b");
    assert.equal((await getVolume(pv.metadata.name)).spec.volumeAttributesClassName, "tier-b");
    assert.deepEqual((await backing(handle)).mutableParameters, { tier: "premium" });
    const reasons = await reasonsOf(c.metadata.uid ?? "");
    assert.ok(reasons.includes("Normal VolumeModify"), reasons.join("\n"));
    assert.ok(reasons.includes("Normal VolumeModifySuccessful"), reasons.join("\n"));
  });

  it("no capacity ever went down, and the resizer's /metrics has the CSI calls", async () => {
    assert.deepEqual(shrinks, []);
    assert.ok(lastCapacity.size >= 6, [...lastCapacity.keys()].join(" "));
    const text = await (await fetch(`${system.url("resizer")}/metrics`)).text();
    for (const method of ["ControllerExpandVolume", "ControllerModifyVolume"]) {
      const line = text
        .split("\n")
        .find(
          (l) =>
            l.startsWith("csi_sidecar_operations_seconds_count{") &&
            l.includes(`method_name="/csi.v1.Controller/${method}"`) &&
            l.includes('grpc_status_code="OK"') &&
            l.includes(`driver_name="${driver}"`),
        );
      assert.ok(line, `${method} OK in:\n${text}`);
      assert.ok(Number(line.split(" ").at(-1)) >= 1, line);
    }
    assert.match(
      text,
      /csi_sidecar_operations_seconds_count\{[^}]*method_name="\/csi\.v1\.Controller\/ControllerExpandVolume"[^}]*grpc_status_code="OutOfRange"/,
    );
    assert.match(
      text,
      /csi_sidecar_operations_seconds_count\{[^}]*method_name="\/csi\.v1\.Controller\/ControllerModifyVolume"[^}]*grpc_status_code="InvalidArgument"/,
    );
  });
});
