// The end-of-run invariant check: DESIGN.md's invariants 1 and 4 plus the
// outcome the run promises, computed from what a client sees once faults are
// off and the system is quiet (lists through the API, backing volumes from the
// driver's admin endpoint), merged with what the watchdog saw during the run.
// Every count must be 0; `examples` names the objects behind a non-zero count.
//
// Definitions (counts are of distinct objects):
// - pvsBoundToTwoClaims: PVs named by spec.volumeName of two or more claims
//   that are phase Bound (at the end, or at any moment during the run).
// - claimsBoundToTwoPVs: Bound claims C for which a PV other than
//   C.spec.volumeName still has spec.claimRef.uid == C.uid (whatever its
//   phase): once quiet, the binder must have let go of every other volume
//   that once reserved the claim.
// - leakedBackingVolumes: driver volumes that no PV records
//   (spec.csi.volumeHandle) and whose name is not the CreateVolume name of a
//   live claim (pvc-<claim uid>).
// - pvsLost: claims whose spec.volumeName names a PV that does not exist, and
//   pre-created static PVs that are gone (at the end or at any moment).
// - backingVolumesLost: PVs of the run's driver bound to a live claim (by
//   claimRef uid) whose backing volume the driver no longer has: the data
//   of a claim in use is gone, whatever the reclaim policy.
// - retainVolumesDeleted: backing volumes of static PVs (Retain, created by
//   the harness through the driver) or of any Retain PV that the driver no
//   longer has.
// - claimsNotBound: claims of the run (not the churn ones) that are missing,
//   not phase Bound, or Bound to a PV whose claimRef.uid is not theirs.
// - rwoVolumesOnTwoNodes: single-node PVs with VolumeAttachments for two
//   nodes at once (during the run, from the watchdog, or at the end).
// - releasedDeleteVolumesLeft: PVs with reclaim policy Delete whose claim is
//   gone but which still exist (the provisioner must delete them).
// - churnClaimsStuck: deleted churn claims still present (finalizers held).
// - nodeVolumesAttached: node status entries (status.volumesAttached) missing
//   for an attached VolumeAttachment, or listed without one, at the end; and
//   entries listed at any moment without an attached VolumeAttachment (watchdog).
// - attachmentsLeft: VolumeAttachments left, and volumes the driver still
//   has published, once every pod is gone.
// - podsNotGone: pods still there at the end, a minute after the harness
//   deleted them (their kubelet could not tear their volumes down).
// - resizesLost: Bound claims of the run whose request R is not met: PV
//   capacity, claim status.capacity or the driver's file system below R
//   (node expansion is finished by then: the harness ran a pod on every
//   claim waiting for it), or resize conditions (Resizing,
//   FileSystemResizePending, ControllerResizeError, NodeResizeError) or
//   allocatedResourceStatuses left on the claim.
// - volumesShrunk: a PV capacity, claim status.capacity, driver volume size
//   or driver file system size that ever went down (watchdog), or a driver
//   volume smaller than its PV at the end or at any moment (driverBelowPv).
// - modificationsLost: Bound claims of the run with a VolumeAttributesClass
//   V where the PV's spec.volumeAttributesClassName or the claim's
//   status.currentVolumeAttributesClassName is not V, modifyVolumeStatus or
//   a ModifyVolumeError / ModifyingVolume condition is left, or the driver's
//   volume does not carry V's parameters.
import type { BackingVolume } from "../../sandbox/csi/driver.ts";
import { volumesAttachedMismatch } from "../../shared/attach-detach/volumes-attached.ts";
import { isValidQuantity, parseQuantityBytes } from "../../shared/kube/quantity.ts";
import type {
  CSIDriver,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  VolumeAttachment,
  VolumeAttributesClass,
} from "../../shared/kube/types.ts";
import type { Trace } from "./trace.ts";
import type { WatchdogReport } from "./watchdog.ts";

export interface EndState {
  claims: PersistentVolumeClaim[];
  volumes: PersistentVolume[];
  attachments: VolumeAttachment[];
  nodes: Node[];
  drivers: CSIDriver[];
  /** Names of the pods still there. */
  pods: string[];
  backingVolumes: BackingVolume[];
  attributeClasses: VolumeAttributesClass[];
}

export interface Expectations {
  /** namespace/name of the claims that must end Bound. */
  mainClaims: readonly string[];
  /** namespace/name of the claims deleted during the run. */
  churnClaims: readonly string[];
  /** Static PV name -> its backing volume id. */
  staticVolumes: ReadonlyMap<string, string>;
  /** The provisioner's CreateVolume name prefix. */
  volumeNamePrefix: string;
}

export const invariantNames = [
  "pvsBoundToTwoClaims",
  "claimsBoundToTwoPVs",
  "leakedBackingVolumes",
  "pvsLost",
  "retainVolumesDeleted",
  "backingVolumesLost",
  "claimsNotBound",
  "rwoVolumesOnTwoNodes",
  "releasedDeleteVolumesLeft",
  "churnClaimsStuck",
  "nodeVolumesAttached",
  "attachmentsLeft",
  "podsNotGone",
  "resizesLost",
  "volumesShrunk",
  "modificationsLost",
] as const;
export type InvariantName = (typeof invariantNames)[number];

export interface Example {
  object: string;
  detail: string;
  /** The object's recent changes and driver calls (bench/chaos/trace.ts). */
  timeline: string[];
}

export interface InvariantResult {
  counts: Record<InvariantName, number>;
  /** Every object behind each count. */
  objects: Record<InvariantName, string[]>;
  examples: Partial<Record<InvariantName, Example[]>>;
}

const keyOf = (c: PersistentVolumeClaim): string => `${c.metadata.namespace}/${c.metadata.name}`;

export function checkInvariants(
  end: EndState,
  expect: Expectations,
  seen: WatchdogReport,
  trace: Trace,
): InvariantResult {
  const found = new Map<InvariantName, Map<string, Example>>(invariantNames.map((n) => [n, new Map()]));
  // Objects are PV names, claim keys or volume handles; the trace files driver calls under the PV's name.
  const add = (name: InvariantName, object: string, detail: string, alsoOf?: string): void => {
    const m = found.get(name)!;
    if (m.has(object)) return;
    const timeline = trace.of(trace.keyOfHandle(object));
    // A claim's story is half in its PV's (sizes, classes, driver calls).
    if (alsoOf) timeline.push(...trace.of(alsoOf).map((line) => `${alsoOf}: ${line}`));
    m.set(object, { object, detail, timeline });
  };

  const pvByName = new Map(end.volumes.map((v) => [v.metadata.name, v]));
  const claimByKey = new Map(end.claims.map((c) => [keyOf(c), c]));
  const liveUids = new Set(end.claims.map((c) => c.metadata.uid ?? ""));
  const handles = new Set(end.backingVolumes.map((b) => b.volumeId));

  // PVs bound to two claims.
  const boundByPv = new Map<string, string[]>();
  for (const c of end.claims) {
    const pv = c.spec.volumeName;
    if (c.status?.phase === "Bound" && pv) boundByPv.set(pv, [...(boundByPv.get(pv) ?? []), keyOf(c)]);
  }
  for (const [pv, claims] of boundByPv) {
    if (claims.length > 1) add("pvsBoundToTwoClaims", pv, `at the end, Bound claims ${claims.join(", ")}`);
  }
  for (const v of seen.pvBoundToTwoClaims)
    add("pvsBoundToTwoClaims", v.object, `at ${v.atMs} ms, ${v.detail}`);

  // Claims bound to two PVs.
  for (const c of end.claims) {
    if (c.status?.phase !== "Bound" || !c.metadata.uid) continue;
    const others = end.volumes.filter(
      (v) => v.spec.claimRef?.uid === c.metadata.uid && v.metadata.name !== c.spec.volumeName,
    );
    if (others.length > 0) {
      add(
        "claimsBoundToTwoPVs",
        keyOf(c),
        `uses ${c.spec.volumeName}, also reserved by ${others.map((v) => `${v.metadata.name} (${v.status?.phase ?? "no phase"})`).join(", ")}`,
      );
    }
  }

  // Leaked backing volumes.
  const recorded = new Set(end.volumes.map((v) => v.spec.csi?.volumeHandle).filter((h) => h !== undefined));
  const claimVolumeNames = new Set([...liveUids].map((uid) => `${expect.volumeNamePrefix}-${uid}`));
  for (const b of end.backingVolumes) {
    if (!recorded.has(b.volumeId) && !claimVolumeNames.has(b.name)) {
      add("leakedBackingVolumes", b.volumeId, `name ${b.name}, no PV and no live claim`);
    }
  }

  // PVs lost.
  for (const c of end.claims) {
    const pv = c.spec.volumeName;
    if (pv && !pvByName.has(pv))
      add("pvsLost", pv, `named by claim ${keyOf(c)} (${c.status?.phase}) but gone`);
  }
  for (const name of expect.staticVolumes.keys()) {
    if (!pvByName.has(name)) add("pvsLost", name, "static PV gone at the end");
  }
  for (const v of seen.staticPvDeleted) add("pvsLost", v.object, `static PV deleted at ${v.atMs} ms`);

  // Retain volumes deleted.
  for (const [pv, handle] of expect.staticVolumes) {
    if (!handles.has(handle))
      add("retainVolumesDeleted", handle, `backing volume of static PV ${pv} is gone`);
  }
  for (const v of end.volumes) {
    const handle = v.spec.csi?.volumeHandle;
    if (v.spec.persistentVolumeReclaimPolicy === "Retain" && handle && !handles.has(handle)) {
      add("retainVolumesDeleted", handle, `backing volume of Retain PV ${v.metadata.name} is gone`);
    }
  }

  // Volumes of live claims whose data is gone.
  for (const v of end.volumes) {
    const handle = v.spec.csi?.volumeHandle;
    const uid = v.spec.claimRef?.uid;
    if (handle && uid && liveUids.has(uid) && !handles.has(handle))
      add(
        "backingVolumesLost",
        v.metadata.name,
        `claim ${v.spec.claimRef?.name} is live, volume ${handle} is gone`,
      );
  }

  // Claims not Bound.
  for (const key of expect.mainClaims) {
    const c = claimByKey.get(key);
    if (!c) {
      add("claimsNotBound", key, "claim is gone");
      continue;
    }
    const pv = c.spec.volumeName ? pvByName.get(c.spec.volumeName) : undefined;
    if (c.status?.phase !== "Bound") {
      // Which volumes of its class there were: a static claim waits for an Available one.
      const sameClass = end.volumes.filter(
        (v) => (v.spec.storageClassName ?? "") === (c.spec.storageClassName ?? ""),
      );
      const phases = sameClass.map(
        (v) =>
          `${v.metadata.name} ${v.status?.phase ?? "-"}${v.spec.claimRef ? ` →${v.spec.claimRef.name}` : ""}`,
      );
      add(
        "claimsNotBound",
        key,
        `phase ${c.status?.phase ?? "none"}, volumeName ${c.spec.volumeName ?? "none"}; volumes of its class: ${phases.join(", ")}`,
      );
    } else if (!pv || pv.spec.claimRef?.uid !== c.metadata.uid) {
      add("claimsNotBound", key, `Bound to ${c.spec.volumeName}, whose claimRef is not this claim`);
    }
  }

  // Single-node volumes on two nodes.
  for (const v of seen.rwoOnTwoNodes) add("rwoVolumesOnTwoNodes", v.object, `at ${v.atMs} ms, ${v.detail}`);
  const nodesByPv = new Map<string, Set<string>>();
  for (const a of end.attachments) {
    const pv = a.spec.source.persistentVolumeName;
    if (!pv) continue;
    nodesByPv.set(pv, (nodesByPv.get(pv) ?? new Set()).add(a.spec.nodeName));
  }
  for (const [pv, nodes] of nodesByPv) {
    const modes = pvByName.get(pv)?.spec.accessModes ?? ["ReadWriteOnce"];
    const multi = modes.includes("ReadWriteMany") || modes.includes("ReadOnlyMany");
    if (!multi && nodes.size > 1) add("rwoVolumesOnTwoNodes", pv, `at the end on ${[...nodes].join(", ")}`);
  }

  // Released Delete volumes left behind.
  for (const v of end.volumes) {
    const uid = v.spec.claimRef?.uid;
    if (v.spec.persistentVolumeReclaimPolicy === "Delete" && uid && !liveUids.has(uid)) {
      add(
        "releasedDeleteVolumesLeft",
        v.metadata.name,
        `claim ${v.spec.claimRef?.name} is gone, phase ${v.status?.phase}`,
      );
    }
  }

  // Churn claims that could not go.
  for (const key of expect.churnClaims) {
    const c = claimByKey.get(key);
    if (c)
      add(
        "churnClaimsStuck",
        key,
        `still present, finalizers ${JSON.stringify(c.metadata.finalizers ?? [])}`,
      );
  }

  // Node status against the attachments.
  for (const node of end.nodes) {
    const { missing, extra } = volumesAttachedMismatch({
      node,
      attachments: end.attachments,
      volumes: end.volumes,
      drivers: end.drivers,
    });
    if (missing.length + extra.length > 0)
      add(
        "nodeVolumesAttached",
        node.metadata.name,
        `at the end, missing ${missing.join(", ") || "-"}; extra ${extra.join(", ") || "-"}`,
      );
  }
  for (const v of seen.listedNotAttached)
    add("nodeVolumesAttached", v.object, `at ${v.atMs} ms, ${v.detail}`);

  // Attachments left once every pod is gone.
  for (const name of end.pods) add("podsNotGone", name, "deleted by the harness, still there");
  if (end.pods.length === 0) {
    for (const a of end.attachments) {
      add(
        "attachmentsLeft",
        a.metadata.name,
        `VolumeAttachment of ${a.spec.source.persistentVolumeName} on ${a.spec.nodeName}`,
      );
    }
    for (const b of end.backingVolumes) {
      if (b.publishedNodes.length > 0)
        add("attachmentsLeft", b.volumeId, `published on ${b.publishedNodes.join(", ")}`);
    }
  }

  checkResizes(end, expect, seen, add);

  const counts = Object.fromEntries(invariantNames.map((n) => [n, found.get(n)!.size])) as Record<
    InvariantName,
    number
  >;
  const examples: Partial<Record<InvariantName, Example[]>> = {};
  for (const n of invariantNames) {
    const list = [...found.get(n)!.values()];
    if (list.length > 0) examples[n] = list.slice(0, 5);
  }
  const objects = Object.fromEntries(invariantNames.map((n) => [n, [...found.get(n)!.keys()]])) as Record<
    InvariantName,
    string[]
  >;
  return { counts, objects, examples };
}

const resizeConditionTypes = [
  "Resizing",
  "FileSystemResizePending",
  "ControllerResizeError",
  "NodeResizeError",
];
const modifyConditionTypes = ["ModifyVolumeError", "ModifyingVolume"];

function bytesOf(q: string | undefined): number | undefined {
  return q !== undefined && isValidQuantity(q) ? Number(parseQuantityBytes(q)) : undefined;
}

/** resizesLost, volumesShrunk and modificationsLost (issue 18). */
function checkResizes(
  end: EndState,
  expect: Expectations,
  seen: WatchdogReport,
  add: (name: InvariantName, object: string, detail: string, alsoOf?: string) => void,
): void {
  const pvByName = new Map(end.volumes.map((v) => [v.metadata.name, v]));
  const backingOf = new Map(end.backingVolumes.map((b) => [b.volumeId, b]));
  const classByName = new Map(end.attributeClasses.map((c) => [c.metadata.name, c]));
  const main = new Set(expect.mainClaims);

  for (const v of seen.shrunk) add("volumesShrunk", v.object, `at ${v.atMs} ms, ${v.detail}`);
  for (const v of seen.driverBelowPv) add("volumesShrunk", v.object, `at ${v.atMs} ms, ${v.detail}`);
  for (const pv of end.volumes) {
    const b = pv.spec.csi ? backingOf.get(pv.spec.csi.volumeHandle) : undefined;
    const size = bytesOf(pv.spec.capacity?.storage);
    if (b && size !== undefined && b.capacityBytes < size)
      add(
        "volumesShrunk",
        pv.metadata.name,
        `at the end the driver's volume has ${b.capacityBytes} bytes, the PV ${size}`,
      );
  }

  for (const c of end.claims) {
    const key = keyOf(c);
    if (!main.has(key) || c.status?.phase !== "Bound") continue;
    const pv = c.spec.volumeName ? pvByName.get(c.spec.volumeName) : undefined;
    if (!pv) continue;
    const b = pv.spec.csi ? backingOf.get(pv.spec.csi.volumeHandle) : undefined;
    const request = c.spec.resources?.requests?.storage;
    const r = bytesOf(request) ?? 0;
    const problems: string[] = [];
    if ((bytesOf(pv.spec.capacity?.storage) ?? 0) < r)
      problems.push(`PV capacity ${pv.spec.capacity?.storage}`);
    if ((bytesOf(c.status?.capacity?.storage) ?? 0) < r)
      problems.push(`claim capacity ${c.status?.capacity?.storage}`);
    if (b && b.kind === "mount" && b.nodeCapacityBytes < r)
      problems.push(`driver file system ${b.nodeCapacityBytes} bytes`);
    const statuses = c.status?.allocatedResourceStatuses ?? {};
    if (Object.keys(statuses).length > 0)
      problems.push(`allocatedResourceStatuses ${JSON.stringify(statuses)}`);
    const left = (c.status?.conditions ?? [])
      .map((x) => String(x.type))
      .filter((t) => resizeConditionTypes.includes(t));
    if (left.length > 0) problems.push(`conditions ${left.join(", ")}`);
    if (problems.length > 0)
      add("resizesLost", key, `request ${request}: ${problems.join("; ")}`, pv.metadata.name);

    const vac = c.spec.volumeAttributesClassName;
    if (!vac) continue;
    const wrong: string[] = [];
    if (pv.spec.volumeAttributesClassName !== vac)
      wrong.push(`PV class ${pv.spec.volumeAttributesClassName ?? "none"}`);
    if (c.status?.currentVolumeAttributesClassName !== vac)
      wrong.push(`current class ${c.status?.currentVolumeAttributesClassName ?? "none"}`);
    if (c.status?.modifyVolumeStatus)
      wrong.push(`modifyVolumeStatus ${JSON.stringify(c.status.modifyVolumeStatus)}`);
    const modifyLeft = (c.status?.conditions ?? [])
      .map((x) => String(x.type))
      .filter((t) => modifyConditionTypes.includes(t));
    if (modifyLeft.length > 0) wrong.push(`conditions ${modifyLeft.join(", ")}`);
    const params = classByName.get(vac)?.parameters ?? {};
    const applied = b?.mutableParameters ?? {};
    if (Object.entries(params).some(([k, v]) => applied[k] !== v))
      wrong.push(`driver parameters ${JSON.stringify(applied)}, class ${JSON.stringify(params)}`);
    if (wrong.length > 0)
      add("modificationsLost", key, `class ${vac}: ${wrong.join("; ")}`, pv.metadata.name);
  }
}
