// The attach/detach reconcile as tables: one node's state in, the steps out.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, it } from "node:test";
import {
  annAttachErrorReported,
  annAttachReported,
  annDetachRequestedAt,
  annListedAt,
} from "../../shared/attach-detach/constants.ts";
import { type DetachPolicy, defaultDetachPolicy } from "../../shared/attach-detach/detach-policy.ts";
import {
  type AttachDetachStep,
  desiredVolumes,
  multiAttachMessage,
  type NodeReconcileInput,
  reconcileNode,
} from "../../shared/attach-detach/reconcile-node.ts";
import { uniqueVolumeName, volumeAttachmentName } from "../../shared/attach-detach/volume-attachment-name.ts";
import {
  expectedVolumesAttached,
  volumesAttachedMismatch,
} from "../../shared/attach-detach/volumes-attached.ts";
import type {
  CSIDriver,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  VolumeAttachment,
} from "../../shared/kube/types.ts";
import { annAttachLock, annControllerManagedAttachDetach } from "../../shared/kube/well-known.ts";

const driver = "hostpath.csi.k8s.io";
const now = new Date("2026-01-01T00:10:00Z");

function node(
  name: string,
  opts: {
    ready?: boolean;
    inUse?: string[];
    outOfService?: boolean | { value?: string; effect: string };
    attached?: { name: string; devicePath: string }[];
  } = {},
): Node {
  const taint = opts.outOfService === true ? { effect: "NoExecute" } : opts.outOfService || undefined;
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, resourceVersion: "7", annotations: { [annControllerManagedAttachDetach]: "true" } },
    spec: taint ? { taints: [{ key: "node.kubernetes.io/out-of-service", ...taint }] } : {},
    status: {
      conditions: [{ type: "Ready", status: opts.ready === false ? "False" : "True" }],
      ...(opts.inUse ? { volumesInUse: opts.inUse } : {}),
      ...(opts.attached ? { volumesAttached: opts.attached } : {}),
    },
  };
}

/** A node status entry of ours for pvN (volume handle h-pvN of the test driver). */
function listed(pvName: string, driverName = driver): { name: string; devicePath: string } {
  return { name: uniqueVolumeName(driverName, `h-${pvName}`), devicePath: "" };
}

function pod(name: string, claim: string, nodeName: string, phase = "Running"): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "ns", uid: `uid-${name}` },
    spec: { nodeName, volumes: [{ name: "data", persistentVolumeClaim: { claimName: claim } }] },
    status: { phase },
  };
}

/** The pod being deleted, with these container statuses. */
function deleting(p: Pod, containerStatuses: unknown[]): Pod {
  return {
    ...p,
    metadata: { ...p.metadata, deletionTimestamp: "2026-01-01T00:09:00Z" },
    status: { ...p.status, containerStatuses } as Pod["status"],
  };
}

function claim(name: string, volumeName?: string): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "ns", uid: `uid-${name}` },
    spec: { accessModes: ["ReadWriteOnce"], ...(volumeName ? { volumeName } : {}) },
  };
}

function pv(
  name: string,
  claimName: string,
  opts: { modes?: string[]; lock?: string; csi?: boolean; driverName?: string } = {},
): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name, ...(opts.lock ? { annotations: { [annAttachLock]: opts.lock } } : {}) },
    spec: {
      accessModes: opts.modes ?? ["ReadWriteOnce"],
      claimRef: { namespace: "ns", name: claimName, uid: `uid-${claimName}` },
      ...(opts.csi === false
        ? { hostPath: { path: "/x" } }
        : { csi: { driver: opts.driverName ?? driver, volumeHandle: `h-${name}` } }),
    },
  };
}

const vaName = (pvName: string, nodeName: string): string =>
  volumeAttachmentName(`h-${pvName}`, driver, nodeName);

function va(
  pvName: string,
  nodeName: string,
  extra: Partial<VolumeAttachment> & { annotations?: Record<string, string> } = {},
): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: {
      name: volumeAttachmentName(`h-${pvName}`, driver, nodeName),
      uid: `va-${pvName}-${nodeName}`,
      ...(extra.annotations ? { annotations: extra.annotations } : {}),
      ...(extra.metadata ?? {}),
    },
    spec: { attacher: driver, nodeName, source: { persistentVolumeName: pvName } },
    ...(extra.status ? { status: extra.status } : {}),
  };
}

function csiDriver(name: string, attachRequired: boolean): CSIDriver {
  return { apiVersion: "storage.k8s.io/v1", kind: "CSIDriver", metadata: { name }, spec: { attachRequired } };
}

function input(partial: Partial<NodeReconcileInput>): NodeReconcileInput {
  return {
    nodeName: "node-a",
    node: node("node-a"),
    pods: [],
    claims: [],
    volumes: [],
    drivers: [],
    attachments: [],
    now,
    ...partial,
  };
}

function describeStep(s: AttachDetachStep): string {
  switch (s.op) {
    case "acquire-lock":
    case "confirm-lock":
    case "release-lock":
      return `${s.op} ${s.volume.metadata.name}`;
    case "create-attachment":
      return `${s.op} ${s.attachment.spec.source.persistentVolumeName}@${s.attachment.spec.nodeName}`;
    case "delete-attachment":
      return `${s.op} ${s.attachment.spec.source.persistentVolumeName}@${s.attachment.spec.nodeName}${s.force ? ` force=${s.force}` : ""}`;
    case "update-node-status":
      return `${s.op} ${s.node.metadata.name} [${s.volumesAttached.map((v) => `${v.name}=${JSON.stringify(v.devicePath)}`).join(", ")}]${s.fence ? ` fence=${s.fence}` : ""}`;
    case "update-attachment":
      return `${s.op} ${s.attachment.spec.source.persistentVolumeName} ${JSON.stringify(s.attachment.metadata.annotations ?? {})}`;
    case "event":
      return `event ${s.pod.metadata.name} ${s.type} ${s.reason}`;
    case "multi-attach":
      return `multi-attach ${s.volume.metadata.name} ${s.pods.map((p) => p.metadata.name).join(",")}`;
  }
}

function ops(steps: AttachDetachStep[]): string[] {
  return steps.map(describeStep);
}

describe("attach/detach: VolumeAttachment names as upstream", () => {
  it("csi- + hex sha256(volumeHandle + driver + node)", () => {
    const expected = `csi-${createHash("sha256").update("vol-1hostpath.csi.k8s.ionode-a").digest("hex")}`;
    assert.equal(volumeAttachmentName("vol-1", driver, "node-a"), expected);
    assert.equal(uniqueVolumeName(driver, "vol-1"), "kubernetes.io/csi/hostpath.csi.k8s.io^vol-1");
  });
});

describe("attach/detach: desired state", () => {
  const cases: { name: string; in: Partial<NodeReconcileInput>; want: string[] }[] = [
    {
      name: "a running pod with a bound CSI claim wants its PV",
      in: { pods: [pod("p", "c", "node-a")], claims: [claim("c", "pv1")], volumes: [pv("pv1", "c")] },
      want: ["pv1"],
    },
    {
      name: "terminated pods want nothing",
      in: {
        pods: [pod("p", "c", "node-a", "Succeeded"), pod("q", "c", "node-a", "Failed")],
        claims: [claim("c", "pv1")],
        volumes: [pv("pv1", "c")],
      },
      want: [],
    },
    {
      // Upstream's volume util IsPodTerminated: a pod being deleted counts once no container runs.
      name: "a pod being deleted wants nothing once no container runs; with one running it still wants its PV",
      in: {
        pods: [
          deleting(pod("p", "c", "node-a"), [{ state: { terminated: { exitCode: 0 } } }]),
          deleting(pod("q", "d", "node-a"), [{ state: { running: {} } }]),
        ],
        claims: [claim("c", "pv1"), claim("d", "pv2")],
        volumes: [pv("pv1", "c"), pv("pv2", "d")],
      },
      want: ["pv2"],
    },
    {
      name: "an unbound claim wants nothing yet",
      in: { pods: [pod("p", "c", "node-a")], claims: [claim("c")], volumes: [] },
      want: [],
    },
    {
      name: "a PV not bound back to the claim is not attached",
      in: { pods: [pod("p", "c", "node-a")], claims: [claim("c", "pv1")], volumes: [pv("pv1", "other")] },
      want: [],
    },
    {
      name: "non-CSI volumes are not this controller's",
      in: {
        pods: [pod("p", "c", "node-a")],
        claims: [claim("c", "pv1")],
        volumes: [pv("pv1", "c", { csi: false })],
      },
      want: [],
    },
    {
      name: "a CSIDriver with attachRequired: false is skipped; without a CSIDriver attach is required",
      in: {
        pods: [pod("p", "c", "node-a"), pod("q", "d", "node-a")],
        claims: [claim("c", "pv1"), claim("d", "pv2")],
        volumes: [
          pv("pv1", "c", { driverName: "noattach.csi" }),
          pv("pv2", "d", { driverName: "unknown.csi" }),
        ],
        drivers: [csiDriver("noattach.csi", false)],
      },
      want: ["pv2"],
    },
    {
      name: "pods on other nodes do not count",
      in: { pods: [pod("p", "c", "node-b")], claims: [claim("c", "pv1")], volumes: [pv("pv1", "c")] },
      want: [],
    },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual([...desiredVolumes(input(c.in)).keys()], c.want));
  }
});

describe("attach/detach: reconcile", () => {
  const base = { pods: [pod("p", "c", "node-a")], claims: [claim("c", "pv1")] };
  const cases: { name: string; in: Partial<NodeReconcileInput>; want: string[] }[] = [
    {
      name: "attach: take the single-node lock, then create the VolumeAttachment",
      in: { ...base, volumes: [pv("pv1", "c")] },
      want: ["acquire-lock pv1", "create-attachment pv1@node-a"],
    },
    {
      name: "attach with the lock already ours (a retry after a crash)",
      in: { ...base, volumes: [pv("pv1", "c", { lock: "node-a" })] },
      want: ["confirm-lock pv1", "create-attachment pv1@node-a"],
    },
    {
      name: "a multi-node volume needs no lock",
      in: {
        ...base,
        volumes: [pv("pv1", "c", { modes: ["ReadWriteMany"] })],
        attachments: [va("pv1", "node-b")],
      },
      want: ["create-attachment pv1@node-a"],
    },
    {
      name: "Multi-Attach: a single-node volume attached elsewhere",
      in: { ...base, volumes: [pv("pv1", "c", { lock: "node-b" })], attachments: [va("pv1", "node-b")] },
      want: ["multi-attach pv1 p"],
    },
    {
      name: "Multi-Attach: the lock is held elsewhere even before that node's VolumeAttachment exists",
      in: { ...base, volumes: [pv("pv1", "c", { lock: "node-b" })] },
      want: ["multi-attach pv1 p"],
    },
    {
      name: "attached: SuccessfulAttachVolume once per pod, remembered on the VolumeAttachment",
      in: {
        ...base,
        node: node("node-a", { attached: [listed("pv1")] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a", { status: { attached: true } })],
      },
      want: [
        "event p Normal SuccessfulAttachVolume",
        `update-attachment pv1 {"${annAttachReported}":"true"}`,
      ],
    },
    {
      name: "attached, announced and listed: nothing to do",
      in: {
        ...base,
        node: node("node-a", { attached: [listed("pv1")] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [
          va("pv1", "node-a", { status: { attached: true }, annotations: { [annAttachReported]: "true" } }),
        ],
      },
      want: [],
    },
    {
      name: "attach error: FailedAttachVolume once per error",
      in: {
        ...base,
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [
          va("pv1", "node-a", {
            status: { attached: false, attachError: { time: "2026-01-01T00:00:00Z", message: "boom" } },
          }),
        ],
      },
      want: [
        "event p Warning FailedAttachVolume",
        `update-attachment pv1 {"${annAttachErrorReported}":"2026-01-01T00:00:00Z"}`,
      ],
    },
    {
      // Nothing to unlist, so a fence write on the node goes first (see ordered() in reconcile-node.ts).
      name: "detach: nobody uses it and the node does not report it in use",
      in: { volumes: [pv("pv1", "c", { lock: "node-a" })], attachments: [va("pv1", "node-a")] },
      want: [
        `update-node-status node-a [] fence=${vaName("pv1", "node-a")}@7`,
        "delete-attachment pv1@node-a",
      ],
    },
    {
      name: "detach waits while the node reports the volume in use, and notes since when",
      in: {
        node: node("node-a", { inUse: [uniqueVolumeName(driver, "h-pv1")] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a")],
      },
      want: [`update-attachment pv1 {"${annDetachRequestedAt}":"2026-01-01T00:10:00.000Z"}`],
    },
    {
      name: "a healthy node keeps the volume as long as it is in use",
      in: {
        node: node("node-a", { inUse: [uniqueVolumeName(driver, "h-pv1")] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [
          va("pv1", "node-a", { annotations: { [annDetachRequestedAt]: "2025-12-31T00:00:00Z" } }),
        ],
      },
      want: [],
    },
    {
      name: "an unhealthy node gets 6 minutes, then the volume is force detached",
      in: {
        node: node("node-a", { ready: false, inUse: [uniqueVolumeName(driver, "h-pv1")] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [
          va("pv1", "node-a", { annotations: { [annDetachRequestedAt]: "2026-01-01T00:03:59Z" } }),
        ],
      },
      want: [
        `update-node-status node-a [] fence=${vaName("pv1", "node-a")}@7`,
        "delete-attachment pv1@node-a force=timeout",
      ],
    },
    {
      name: "... but not before the 6 minutes are up",
      in: {
        node: node("node-a", { ready: false, inUse: [uniqueVolumeName(driver, "h-pv1")] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [
          va("pv1", "node-a", { annotations: { [annDetachRequestedAt]: "2026-01-01T00:04:30Z" } }),
        ],
      },
      want: [],
    },
    {
      name: "a lock with no attachment and no pod here is released",
      in: { volumes: [pv("pv1", "c", { lock: "node-a" })] },
      want: ["release-lock pv1"],
    },
    {
      name: "an attachment still detaching blocks a new attach on the same node",
      in: {
        ...base,
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [
          va("pv1", "node-a", {
            metadata: {
              name: volumeAttachmentName("h-pv1", driver, "node-a"),
              deletionTimestamp: "2026-01-01T00:00:00Z",
            },
          }),
        ],
      },
      want: [],
    },
    {
      name: "a deleted Node: its attachments detach",
      in: {
        node: undefined,
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a")],
      },
      want: ["delete-attachment pv1@node-a"],
    },
    {
      // Upstream's controller only manages nodes annotated volumes.kubernetes.io/controller-managed-attach-detach.
      name: "a node whose kubelet manages attach/detach: nothing attached, detached or listed",
      in: {
        node: { ...node("node-a"), metadata: { name: "node-a", resourceVersion: "7" } },
        pods: [pod("p", "c", "node-a")],
        claims: [claim("c", "pv1")],
        volumes: [pv("pv1", "c"), pv("pv2", "c2", { lock: "node-a" })],
        attachments: [va("pv2", "node-a", { status: { attached: true } })],
      },
      want: [],
    },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(ops(reconcileNode(input(c.in)).steps), c.want));
  }
});

describe("attach/detach: node status volumesAttached", () => {
  const base = { pods: [pod("p", "c", "node-a")], claims: [claim("c", "pv1")] };
  const attached = { status: { attached: true }, annotations: { [annAttachReported]: "true" } };
  const vol1 = listed("pv1");
  const inTree = { name: "kubernetes.io/aws-ebs/vol-0abc", devicePath: "/dev/xvdf" };
  const noAttach = { name: "kubernetes.io/csi/noattach.csi^h-x", devicePath: "" };
  const cases: { name: string; in: Partial<NodeReconcileInput>; want: string[] }[] = [
    {
      name: "attach reported: the volume is listed, with an empty devicePath, before anything else",
      in: {
        ...base,
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a", { status: { attached: true } })],
      },
      // The attachment is written before the node lists it (annListedAt: the node's resourceVersion as read).
      want: [
        `update-attachment pv1 {"${annAttachReported}":"true","${annListedAt}":"7"}`,
        `update-node-status node-a [${vol1.name}=""]`,
        "event p Normal SuccessfulAttachVolume",
      ],
    },
    {
      name: "not attached yet: not listed, nothing written",
      in: {
        ...base,
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a", { status: { attached: false } })],
      },
      want: [],
    },
    {
      name: "already right: no write",
      in: {
        ...base,
        node: node("node-a", { attached: [vol1] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a", attached)],
      },
      want: [],
    },
    {
      name: "already right in another writer's order: no write",
      in: {
        ...base,
        node: node("node-a", { attached: [vol1, inTree] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a", attached)],
      },
      want: [],
    },
    {
      name: "detach: the volume leaves the list first, then the VolumeAttachment is deleted",
      in: {
        node: node("node-a", { attached: [vol1] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a", attached)],
      },
      want: ["update-node-status node-a []", "delete-attachment pv1@node-a"],
    },
    {
      name: "a detach that waits for unmount keeps the volume listed",
      in: {
        node: node("node-a", { attached: [vol1], inUse: [vol1.name] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [
          va("pv1", "node-a", {
            ...attached,
            annotations: { ...attached.annotations, [annDetachRequestedAt]: "2026-01-01T00:09:00Z" },
          }),
        ],
      },
      want: [],
    },
    {
      name: "a VolumeAttachment being deleted is not listed",
      in: {
        node: node("node-a", { attached: [vol1] }),
        volumes: [pv("pv1", "c")],
        attachments: [
          va("pv1", "node-a", {
            status: { attached: true },
            metadata: {
              name: volumeAttachmentName("h-pv1", driver, "node-a"),
              deletionTimestamp: "2026-01-01T00:00:00Z",
            },
          }),
        ],
      },
      want: ["update-node-status node-a []"],
    },
    {
      name: "attached=false (unpublished) is not listed",
      in: {
        ...base,
        node: node("node-a", { attached: [vol1] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a", { status: { attached: false } })],
      },
      want: ["update-node-status node-a []"],
    },
    {
      name: "foreign entries are kept (in-tree plugins, CSI drivers without attach), the list sorted by name",
      in: {
        ...base,
        node: node("node-a", { attached: [noAttach, inTree] }),
        drivers: [csiDriver("noattach.csi", false)],
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a", attached)],
      },
      want: [
        `update-attachment pv1 {"${annAttachReported}":"true","${annListedAt}":"7"}`,
        `update-node-status node-a [${inTree.name}="/dev/xvdf", ${vol1.name}="", ${noAttach.name}=""]`,
      ],
    },
    {
      name: "a stale entry of ours with no VolumeAttachment is dropped (what resync repairs); foreign ones stay",
      in: { node: node("node-a", { attached: [listed("gone"), inTree, listed("old", "other.csi")] }) },
      want: [`update-node-status node-a [${inTree.name}="/dev/xvdf"]`],
    },
    {
      name: "duplicate entries are written once",
      in: {
        ...base,
        node: node("node-a", { attached: [vol1, vol1] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a", attached)],
      },
      want: [`update-node-status node-a [${vol1.name}=""]`],
    },
    {
      name: "an attached VolumeAttachment whose PV is gone is detached, and leaves the list first",
      in: {
        node: node("node-a", { attached: [vol1] }),
        attachments: [va("pv1", "node-a", attached)],
      },
      want: ["update-node-status node-a []", "delete-attachment pv1@node-a"],
    },
    {
      name: "an inline CSI volume's attachment is listed by its handle",
      in: {
        attachments: [
          {
            apiVersion: "storage.k8s.io/v1",
            kind: "VolumeAttachment",
            metadata: { name: "csi-inline", uid: "u" },
            spec: {
              attacher: driver,
              nodeName: "node-a",
              source: { inlineVolumeSpec: { csi: { driver, volumeHandle: "h-inline" } } },
            },
            status: { attached: true },
          },
        ],
      },
      want: [`update-node-status node-a [${listed("inline").name}=""]`],
    },
    {
      name: "other nodes' attachments are not this node's business",
      in: {
        node: node("node-a", { attached: [vol1] }),
        pods: [pod("p", "c", "node-b")],
        claims: [claim("c", "pv1")],
        volumes: [pv("pv1", "c", { lock: "node-b" })],
        attachments: [va("pv1", "node-b", attached)],
      },
      want: ["update-node-status node-a []"],
    },
    {
      name: "a deleted Node gets no status write",
      in: {
        node: undefined,
        volumes: [pv("pv1", "c", { lock: "node-b" })],
        attachments: [va("pv1", "node-b", attached)],
      },
      want: [],
    },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(ops(reconcileNode(input(c.in)).steps), c.want));
  }

  it("the status step carries the node as read (its resourceVersion makes the write conditional)", () => {
    const n = node("node-a");
    const plan = reconcileNode(
      input({
        ...base,
        node: n,
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a", attached)],
      }),
    );
    const step = plan.steps.find((s) => s.op === "update-node-status");
    assert.equal(step?.op, "update-node-status");
    assert.equal(step.op === "update-node-status" ? step.node.metadata.resourceVersion : "", "7");
  });

  it("expectedVolumesAttached: the chaos check's invariant (every attached VolumeAttachment of the node, nothing else of ours)", () => {
    const n = node("node-a", { attached: [inTree, listed("stale")] });
    const vas = [
      va("pv1", "node-a", attached),
      va("pv2", "node-a", { status: { attached: false } }),
      va("pv3", "node-b", attached),
    ];
    const pvs = [pv("pv1", "c"), pv("pv2", "d"), pv("pv3", "e")];
    assert.deepEqual(expectedVolumesAttached({ node: n, attachments: vas, volumes: pvs, drivers: [] }), [
      inTree,
      vol1,
    ]);
    assert.deepEqual(volumesAttachedMismatch({ node: n, attachments: vas, volumes: pvs, drivers: [] }), {
      missing: [vol1.name],
      extra: [listed("stale").name],
    });
    assert.deepEqual(
      volumesAttachedMismatch({
        node: node("node-a", { attached: [vol1, inTree, vol1] }),
        attachments: vas,
        volumes: pvs,
        drivers: [],
      }),
      { missing: [], extra: [vol1.name] },
    );
    // Without pv1 the attached VolumeAttachment cannot be named: entries of its driver stay as they are.
    assert.deepEqual(
      expectedVolumesAttached({ node: n, attachments: vas, volumes: pvs.slice(1), drivers: [] }),
      [inTree, listed("stale")],
    );
  });
});

describe("attach/detach: force detach (non-graceful shutdown, unmount timeout)", () => {
  const inUse = [uniqueVolumeName(driver, "h-pv1")];
  const listedVa = (requestedAt?: string) =>
    va("pv1", "node-a", {
      status: { attached: true },
      annotations: {
        [annAttachReported]: "true",
        ...(requestedAt ? { [annDetachRequestedAt]: requestedAt } : {}),
      },
    });
  const world = (n: Node, requestedAt?: string): Partial<NodeReconcileInput> => ({
    node: n,
    volumes: [pv("pv1", "c", { lock: "node-a" })],
    attachments: [listedVa(requestedAt)],
  });
  const attachedList = { attached: [listed("pv1")] };
  const disabled: DetachPolicy = { ...defaultDetachPolicy, disableForceDetachOnTimeout: true };
  const cases: { name: string; in: Partial<NodeReconcileInput>; want: string[] }[] = [
    {
      name: "out-of-service: detached at once although in use and Ready, no timer",
      in: world(node("node-a", { ...attachedList, inUse, outOfService: true })),
      want: ["update-node-status node-a []", "delete-attachment pv1@node-a force=out-of-service"],
    },
    {
      name: "out-of-service with any value and effect counts",
      in: world(
        node("node-a", {
          ...attachedList,
          inUse,
          outOfService: { value: "nodeshutdown", effect: "NoSchedule" },
        }),
      ),
      want: ["update-node-status node-a []", "delete-attachment pv1@node-a force=out-of-service"],
    },
    {
      name: "out-of-service and not in use: still counted as an out-of-service detach",
      in: world(node("node-a", { ...attachedList, outOfService: true })),
      want: ["update-node-status node-a []", "delete-attachment pv1@node-a force=out-of-service"],
    },
    {
      name: "out-of-service forces even with force detach on timeout disabled",
      in: { ...world(node("node-a", { ...attachedList, inUse, outOfService: true })), policy: disabled },
      want: ["update-node-status node-a []", "delete-attachment pv1@node-a force=out-of-service"],
    },
    {
      name: "timeout on: a NotReady node still using the volume after 6 minutes is force detached",
      in: world(node("node-a", { ...attachedList, inUse, ready: false }), "2026-01-01T00:03:59Z"),
      want: ["update-node-status node-a []", "delete-attachment pv1@node-a force=timeout"],
    },
    {
      name: "timeout off (--disable-force-detach-on-timeout): it keeps waiting",
      in: {
        ...world(node("node-a", { ...attachedList, inUse, ready: false }), "2026-01-01T00:00:00Z"),
        policy: disabled,
      },
      want: [],
    },
    {
      name: "a healthy node is never force detached, however long it waited",
      in: world(node("node-a", { ...attachedList, inUse }), "2025-12-01T00:00:00Z"),
      want: [],
    },
    {
      name: "a NotReady node in use starts the timer first",
      in: world(node("node-a", { ...attachedList, inUse, ready: false })),
      want: [
        `update-attachment pv1 {"${annAttachReported}":"true","${annDetachRequestedAt}":"${now.toISOString()}"}`,
      ],
    },
    {
      name: "an unreadable timer is started again",
      in: world(node("node-a", { ...attachedList, inUse, ready: false }), "yesterday"),
      want: [
        `update-attachment pv1 {"${annAttachReported}":"true","${annDetachRequestedAt}":"${now.toISOString()}"}`,
      ],
    },
    {
      name: "a configured maxWaitForUnmountDuration (60 s): force detached after it",
      in: {
        ...world(node("node-a", { ...attachedList, inUse, ready: false }), "2026-01-01T00:08:59Z"),
        policy: { ...defaultDetachPolicy, maxWaitForUnmountMs: 60_000 },
      },
      want: ["update-node-status node-a []", "delete-attachment pv1@node-a force=timeout"],
    },
    {
      name: "... and not before",
      in: {
        ...world(node("node-a", { ...attachedList, inUse, ready: false }), "2026-01-01T00:09:30Z"),
        policy: { ...defaultDetachPolicy, maxWaitForUnmountMs: 60_000 },
      },
      want: [],
    },
    {
      name: "a node without a Ready condition is unhealthy",
      in: world(
        {
          ...node("node-a", { ...attachedList, inUse }),
          status: { volumesInUse: inUse, volumesAttached: [listed("pv1")] },
        },
        "2026-01-01T00:00:00Z",
      ),
      want: [`update-node-status node-a []`, "delete-attachment pv1@node-a force=timeout"],
    },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(ops(reconcileNode(input(c.in)).steps), c.want));
  }
});

describe("attach/detach: Multi-Attach message as upstream", () => {
  const other = (name: string, ns: string) => ({
    ...pod(name, "c", "node-b"),
    metadata: { name, namespace: ns },
  });
  it("no pods elsewhere", () =>
    assert.equal(
      multiAttachMessage("pv1", "ns1", []),
      `Multi-Attach error for volume "pv1" Volume is already exclusively attached to one node and can't be attached to another`,
    ));
  it("pods in the same namespace", () =>
    assert.equal(
      multiAttachMessage("pv1", "ns1", [other("pod2", "ns1")]),
      `Multi-Attach error for volume "pv1" Volume is already used by pod(s) pod2`,
    ));
  it("pods in another namespace", () =>
    assert.equal(
      multiAttachMessage("pv1", "ns1", [other("pod2", "ns2")]),
      `Multi-Attach error for volume "pv1" Volume is already used by 1 pod(s) in different namespaces`,
    ));
  it("both", () =>
    assert.equal(
      multiAttachMessage("pv1", "ns1", [other("pod2", "ns2"), other("pod3", "ns1")]),
      `Multi-Attach error for volume "pv1" Volume is already used by pod(s) pod3 and 1 pod(s) in different namespaces`,
    ));
});
