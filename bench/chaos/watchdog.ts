// Invariants checked on every change while the run goes on, not only at the
// end: the harness runs the sandbox in-process, so it subscribes to the
// sandbox store (its "etcd") and sees every committed state, which is
// stronger than sampling lists now and then. Cheap per change: each check
// looks only at the objects the change touched.
//
// Checked continuously (each counts distinct objects that were ever in the bad state):
// - rwoOnTwoNodes: a PV whose access modes allow a single node only (no
//   ReadWriteMany / ReadOnlyMany) with VolumeAttachment objects for two
//   different nodes at the same moment (terminating ones included: upstream
//   counts a volume attached until its detach is confirmed). `attachedOnTwo`
//   is the narrower case where both say status.attached.
// - pvBoundToTwoClaims: a PV named by spec.volumeName of two claims that are
//   both phase Bound at the same moment.
// - staticPvDeleted: a pre-created static PV (Retain) that disappeared.
// - listedNotAttached: a node whose status.volumesAttached names a CSI volume
//   while no VolumeAttachment of that node for it says attached and is not
//   being deleted: the kubelet mounts what that list names, so the entry must
//   leave before the detach starts and come only after the attach.
// - shrunk: a size that went down: a PV's spec.capacity, a claim's
//   status.capacity, or a driver volume's size or file system size (the
//   driver's sizes are reported by the harness after every call that may
//   change them, noteDriverVolume).
// - driverBelowPv: a PV whose capacity grew past what the driver's volume has
//   (the PV may say a size only once the driver has it).
import { resourceTypes } from "../../sandbox/apiserver/resources.ts";
import type { KubeObject, ObjectStore, StoredChange } from "../../sandbox/apiserver/store.ts";
import { isValidQuantity, parseQuantityBytes } from "../../shared/kube/quantity.ts";
import type { PersistentVolumeClaim } from "../../shared/kube/types.ts";
import type { Trace } from "./trace.ts";

export interface Violation {
  object: string;
  detail: string;
  /** ms since the watchdog started */
  atMs: number;
}

export interface WatchdogReport {
  rwoOnTwoNodes: Violation[];
  attachedOnTwoNodes: Violation[];
  pvBoundToTwoClaims: Violation[];
  staticPvDeleted: Violation[];
  listedNotAttached: Violation[];
  shrunk: Violation[];
  driverBelowPv: Violation[];
  /** Pods that went Running (their kubelet staged and published their volume). */
  podsRan: number;
  /** How many of the tracked claims are Bound right now. */
  boundClaims: number;
  changesSeen: number;
}

type FoundKind =
  | "rwoOnTwoNodes"
  | "attachedOnTwoNodes"
  | "pvBoundToTwoClaims"
  | "staticPvDeleted"
  | "listedNotAttached"
  | "shrunk"
  | "driverBelowPv";

interface MaybeSpec {
  spec?: {
    accessModes?: unknown;
    volumeName?: unknown;
    nodeName?: unknown;
    source?: { persistentVolumeName?: unknown };
    attacher?: unknown;
    claimRef?: { name?: unknown; uid?: unknown };
    csi?: { volumeHandle?: unknown };
    capacity?: { storage?: unknown };
    resources?: { requests?: { storage?: unknown } };
    volumeAttributesClassName?: unknown;
  };
  status?: {
    phase?: unknown;
    capacity?: { storage?: unknown };
    allocatedResourceStatuses?: { storage?: unknown };
    currentVolumeAttributesClassName?: unknown;
    modifyVolumeStatus?: { status?: unknown; targetVolumeAttributesClassName?: unknown };
    attached?: unknown;
    attachError?: { message?: unknown };
    volumesAttached?: unknown;
  };
}

/** One line per change for the trace: what changed, in the terms the invariants use. */
function describe(c: StoredChange): string {
  const o = c.object as MaybeSpec;
  const m = c.object.metadata;
  const parts = [`${c.type} ${c.resource.kind} ${m.name}`, `rv ${m.resourceVersion}`];
  if (m.deletionTimestamp) parts.push("deleting");
  if (m.finalizers?.length) parts.push(`finalizers [${m.finalizers.join(",")}]`);
  const phase = str(o.status?.phase);
  if (phase) parts.push(`phase ${phase}`);
  const volumeName = str(o.spec?.volumeName);
  if (volumeName) parts.push(`volumeName ${volumeName}`);
  const claimRef = o.spec?.claimRef;
  if (claimRef) parts.push(`claimRef ${str(claimRef.name)}/${str(claimRef.uid)?.slice(0, 8)}`);
  const node = str(o.spec?.nodeName);
  if (node) parts.push(`node ${node} attached ${o.status?.attached === true}`);
  // Sizes and classes, for the resize and modify invariants' timelines.
  const request = str(o.spec?.resources?.requests?.storage);
  if (request) parts.push(`request ${request}`);
  const capacity = str(o.spec?.capacity?.storage) ?? str(o.status?.capacity?.storage);
  if (capacity) parts.push(`capacity ${capacity}`);
  const resizeStatus = str(o.status?.allocatedResourceStatuses?.storage);
  if (resizeStatus) parts.push(resizeStatus);
  const vac = str(o.spec?.volumeAttributesClassName);
  if (vac) parts.push(`vac ${vac}`);
  const currentVac = str(o.status?.currentVolumeAttributesClassName);
  if (currentVac) parts.push(`currentVac ${currentVac}`);
  const modify = o.status?.modifyVolumeStatus;
  if (modify) parts.push(`modify ${str(modify.status)}→${str(modify.targetVolumeAttributesClassName)}`);
  const attachError = str(o.status?.attachError?.message);
  if (attachError) parts.push(`attachError ${attachError.slice(0, 80)}`);
  for (const [k, v] of Object.entries(m.annotations ?? {})) {
    if (k.includes("lock") || k.endsWith("retry-after")) parts.push(`${k.slice(k.indexOf("/") + 1)}=${v}`);
  }
  return parts.join(" ");
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v !== "" ? v : undefined;
}

function bytesOf(q: unknown): number | undefined {
  return typeof q === "string" && isValidQuantity(q) ? Number(parseQuantityBytes(q)) : undefined;
}

function singleNode(pv: KubeObject): boolean {
  const modes = (pv as MaybeSpec).spec?.accessModes;
  if (!Array.isArray(modes) || modes.length === 0) return false;
  return !modes.includes("ReadWriteMany") && !modes.includes("ReadOnlyMany");
}

export class Watchdog {
  private readonly started = Date.now();
  private readonly staticPvNames: ReadonlySet<string>;
  private readonly trackedClaims: ReadonlySet<string>;
  /** PV name -> VA name -> { node, attached } */
  private readonly attachments = new Map<string, Map<string, { node: string; attached: boolean }>>();
  /** `<node> kubernetes.io/csi/<driver>^<handle>` of every attached VolumeAttachment not being deleted. */
  private readonly attachedKeys = new Map<string, string>();
  /** VA name -> its key in attachedKeys. */
  private readonly keyOfAttachment = new Map<string, string>();
  /** Node name -> the CSI entries its status lists. */
  private readonly listed = new Map<string, string[]>();
  /** PV name -> volume handle. */
  private readonly handles = new Map<string, string>();
  private readonly podsRan = new Set<string>();
  /** PV name -> single-node access, from the PV's last state. */
  private readonly pvSingleNode = new Map<string, boolean>();
  /** PV name -> keys of Bound claims naming it. */
  private readonly boundClaimsByPv = new Map<string, Set<string>>();
  /** claim key -> the PV it was last seen Bound to. */
  private readonly claimBoundTo = new Map<string, string>();
  /** Claim name (the run uses one namespace) -> its last state, for the workload to wait on. */
  private readonly claims = new Map<string, PersistentVolumeClaim>();
  /** "<kind> <name>" -> the last size seen, in bytes. */
  private readonly sizes = new Map<string, number>();
  /** Volume handle -> the driver's size, as last reported. */
  private readonly driverSizes = new Map<string, number>();
  private readonly found: Record<FoundKind, Map<string, Violation>> = {
    rwoOnTwoNodes: new Map<string, Violation>(),
    attachedOnTwoNodes: new Map<string, Violation>(),
    pvBoundToTwoClaims: new Map<string, Violation>(),
    staticPvDeleted: new Map<string, Violation>(),
    listedNotAttached: new Map<string, Violation>(),
    shrunk: new Map<string, Violation>(),
    driverBelowPv: new Map<string, Violation>(),
  };
  private changes = 0;
  private unsubscribe: (() => void) | undefined;

  private readonly trace: Trace;

  constructor(options: { staticPvNames: Iterable<string>; trackedClaims: Iterable<string>; trace: Trace }) {
    this.staticPvNames = new Set(options.staticPvNames);
    this.trackedClaims = new Set(options.trackedClaims);
    this.trace = options.trace;
  }

  watch(store: ObjectStore): void {
    // What exists already (the static PVs, the nodes) is replayed first, as a watch from revision 0 would.
    for (const plural of ["persistentvolumes", "nodes"]) {
      const t = resourceTypes.find((r) => r.group === "" && r.plural === plural)!;
      for (const object of store.peekAll(t)) {
        const resourceVersion = BigInt(object.metadata.resourceVersion ?? "0");
        this.onChange({ type: "ADDED", resource: t, object, previous: undefined, resourceVersion });
      }
    }
    this.unsubscribe = store.subscribe((c) => this.onChange(c));
  }

  stop(): void {
    this.unsubscribe?.();
  }

  private record(kind: FoundKind, object: string, detail: string): void {
    const map = this.found[kind];
    if (!map.has(object)) map.set(object, { object, detail, atMs: Date.now() - this.started });
  }

  private onChange(c: StoredChange): void {
    this.changes++;
    const kind = `${c.resource.group}/${c.resource.plural}`;
    if (kind === "/persistentvolumes") this.onVolume(c);
    else if (kind === "/persistentvolumeclaims") this.onClaim(c);
    else if (kind === "storage.k8s.io/volumeattachments") this.onAttachment(c);
    else if (kind === "/nodes") this.onNode(c);
    else if (kind === "/pods" && (c.object as MaybeSpec).status?.phase === "Running")
      this.podsRan.add(c.object.metadata.uid ?? "");
  }

  private onNode(c: StoredChange): void {
    const node = c.object.metadata.name ?? "";
    const list = (c.object as MaybeSpec).status?.volumesAttached;
    const names =
      c.type === "DELETED" || !Array.isArray(list)
        ? []
        : list
            .map((e) => str((e as { name?: unknown } | null)?.name))
            .filter((n): n is string => n?.startsWith("kubernetes.io/csi/") === true);
    this.listed.set(node, names);
    for (const name of names) this.checkListed(node, name);
  }

  private checkListed(node: string, entry: string): void {
    if ([...this.attachedKeys.values()].includes(`${node} ${entry}`)) return;
    this.record(
      "listedNotAttached",
      `${node} ${entry}`,
      "listed in node status without an attached VolumeAttachment",
    );
  }

  /** Records a size; one below the last seen for the same thing is a shrink. */
  private size(what: string, bytes: number | undefined): void {
    if (bytes === undefined) return;
    const before = this.sizes.get(what);
    if (before !== undefined && bytes < before)
      this.record("shrunk", what, `went from ${before} to ${bytes} bytes`);
    this.sizes.set(what, bytes);
  }

  /** The driver's volume sizes, after a call that may have changed them (or at the end). */
  noteDriverVolume(handle: string, capacityBytes: number, nodeCapacityBytes: number): void {
    this.size(`driver volume ${handle}`, capacityBytes);
    this.size(`driver file system ${handle}`, nodeCapacityBytes);
    this.driverSizes.set(handle, capacityBytes);
  }

  /** The claim as last seen, by name (undefined before it exists and after it is deleted). */
  claim(name: string): PersistentVolumeClaim | undefined {
    return this.claims.get(name);
  }

  private onVolume(c: StoredChange): void {
    const name = c.object.metadata.name ?? "";
    const handle = str((c.object as MaybeSpec).spec?.csi?.volumeHandle);
    if (handle) {
      this.trace.notePvHandle(name, handle);
      this.handles.set(name, handle);
    }
    this.trace.add(name, describe(c));
    if (c.type === "DELETED") {
      this.sizes.delete(`PV ${name}`);
      if (this.staticPvNames.has(name)) this.record("staticPvDeleted", name, "static Retain PV deleted");
      return;
    }
    const capacity = bytesOf((c.object as MaybeSpec).spec?.capacity?.storage);
    const grew = capacity !== undefined && capacity > (this.sizes.get(`PV ${name}`) ?? capacity);
    this.size(`PV ${name}`, capacity);
    const driverHas = handle ? this.driverSizes.get(handle) : undefined;
    if (grew && driverHas !== undefined && capacity > driverHas)
      this.record("driverBelowPv", name, `PV says ${capacity} bytes, the driver's volume has ${driverHas}`);
    this.pvSingleNode.set(name, singleNode(c.object));
    this.checkAttachments(name);
  }

  private onClaim(c: StoredChange): void {
    const key = `${c.object.metadata.namespace}/${c.object.metadata.name}`;
    this.trace.add(key, describe(c));
    const o = c.object as MaybeSpec;
    const name = c.object.metadata.name ?? "";
    if (c.type === "DELETED") {
      this.claims.delete(name);
      this.sizes.delete(`claim ${key}`);
    } else {
      this.claims.set(name, c.object as PersistentVolumeClaim);
      this.size(`claim ${key}`, bytesOf(o.status?.capacity?.storage));
    }
    const nowBoundTo =
      c.type !== "DELETED" && o.status?.phase === "Bound" ? str(o.spec?.volumeName) : undefined;
    const before = this.claimBoundTo.get(key);
    if (before === nowBoundTo) return;
    if (before !== undefined) {
      this.boundClaimsByPv.get(before)?.delete(key);
      this.claimBoundTo.delete(key);
    }
    if (nowBoundTo === undefined) return;
    this.claimBoundTo.set(key, nowBoundTo);
    const set = this.boundClaimsByPv.get(nowBoundTo) ?? new Set<string>();
    set.add(key);
    this.boundClaimsByPv.set(nowBoundTo, set);
    if (set.size > 1) {
      this.record("pvBoundToTwoClaims", nowBoundTo, `Bound claims at once: ${[...set].sort().join(", ")}`);
    }
  }

  private onAttachment(c: StoredChange): void {
    const o = c.object as MaybeSpec;
    const pv = str(o.spec?.source?.persistentVolumeName);
    if (!pv) return;
    this.trace.add(pv, describe(c));
    const name = c.object.metadata.name ?? "";
    const byVa = this.attachments.get(pv) ?? new Map<string, { node: string; attached: boolean }>();
    if (c.type === "DELETED") byVa.delete(name);
    else byVa.set(name, { node: str(o.spec?.nodeName) ?? "", attached: o.status?.attached === true });
    if (byVa.size === 0) this.attachments.delete(pv);
    else this.attachments.set(pv, byVa);
    this.checkAttachments(pv);
    this.trackAttached(c, pv);
  }

  private checkAttachments(pv: string): void {
    const byVa = this.attachments.get(pv);
    if (!byVa || byVa.size < 2) return;
    // An unknown PV (deleted, or not seen yet) counts as single-node: all volumes of this run are RWO.
    if (this.pvSingleNode.get(pv) === false) return;
    const nodes = new Set([...byVa.values()].map((a) => a.node));
    if (nodes.size > 1)
      this.record("rwoOnTwoNodes", pv, `VolumeAttachments on ${[...nodes].sort().join(", ")}`);
    const attached = new Set([...byVa.values()].filter((a) => a.attached).map((a) => a.node));
    if (attached.size > 1) {
      this.record("attachedOnTwoNodes", pv, `attached on ${[...attached].sort().join(", ")}`);
    }
  }

  /** Keeps attachedKeys current; an attachment that stops counting must not still be listed on its node. */
  private trackAttached(c: StoredChange, pv: string): void {
    const o = c.object as MaybeSpec;
    const name = c.object.metadata.name ?? "";
    const node = str(o.spec?.nodeName) ?? "";
    const handle = this.handles.get(pv);
    const counts =
      c.type !== "DELETED" && o.status?.attached === true && !c.object.metadata.deletionTimestamp && handle;
    const before = this.keyOfAttachment.get(name);
    if (counts) {
      const key = `${node} kubernetes.io/csi/${str(o.spec?.attacher)}^${handle}`;
      this.keyOfAttachment.set(name, key);
      this.attachedKeys.set(name, key);
      return;
    }
    this.keyOfAttachment.delete(name);
    this.attachedKeys.delete(name);
    if (before === undefined) return;
    const [beforeNode, entry] = before.split(" ") as [string, string];
    if (this.listed.get(beforeNode)?.includes(entry)) this.checkListed(beforeNode, entry);
  }

  /** Tracked claims currently Bound (from the last state seen). */
  get boundClaims(): number {
    let n = 0;
    for (const key of this.claimBoundTo.keys()) if (this.trackedClaims.has(key)) n++;
    return n;
  }

  report(): WatchdogReport {
    return {
      rwoOnTwoNodes: [...this.found.rwoOnTwoNodes.values()],
      attachedOnTwoNodes: [...this.found.attachedOnTwoNodes.values()],
      pvBoundToTwoClaims: [...this.found.pvBoundToTwoClaims.values()],
      staticPvDeleted: [...this.found.staticPvDeleted.values()],
      listedNotAttached: [...this.found.listedNotAttached.values()],
      shrunk: [...this.found.shrunk.values()],
      driverBelowPv: [...this.found.driverBelowPv.values()],
      podsRan: this.podsRan.size,
      boundClaims: this.boundClaims,
      changesSeen: this.changes,
    };
  }
}
