// The attach/detach reconcile as tables: one node's state in, the steps out.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, it } from "node:test";
import {
  annAttachErrorReported,
  annAttachLock,
  annAttachReported,
  annDetachRequestedAt,
} from "../../shared/attach-detach/constants.ts";
import {
  type AttachDetachStep,
  desiredVolumes,
  multiAttachMessage,
  type NodeReconcileInput,
  reconcileNode,
} from "../../shared/attach-detach/reconcile-node.ts";
import { uniqueVolumeName, volumeAttachmentName } from "../../shared/attach-detach/volume-attachment-name.ts";
import type {
  CSIDriver,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  VolumeAttachment,
} from "../../shared/kube/types.ts";

const driver = "hostpath.csi.k8s.io";
const now = new Date("2026-01-01T00:10:00Z");

function node(name: string, opts: { ready?: boolean; inUse?: string[]; outOfService?: boolean } = {}): Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name },
    spec: opts.outOfService
      ? { taints: [{ key: "node.kubernetes.io/out-of-service", effect: "NoExecute" }] }
      : {},
    status: {
      conditions: [{ type: "Ready", status: opts.ready === false ? "False" : "True" }],
      ...(opts.inUse ? { volumesInUse: opts.inUse } : {}),
    },
  };
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
    case "delete-attachment":
      return `${s.op} ${s.attachment.spec.source.persistentVolumeName}@${s.attachment.spec.nodeName}`;
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
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [va("pv1", "node-a", { status: { attached: true } })],
      },
      want: [
        "event p Normal SuccessfulAttachVolume",
        `update-attachment pv1 {"${annAttachReported}":"true"}`,
      ],
    },
    {
      name: "attached and announced: nothing to do",
      in: {
        ...base,
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
      name: "detach: nobody uses it and the node does not report it in use",
      in: { volumes: [pv("pv1", "c", { lock: "node-a" })], attachments: [va("pv1", "node-a")] },
      want: ["delete-attachment pv1@node-a"],
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
      name: "an unhealthy node gets 6 minutes, then the volume detaches",
      in: {
        node: node("node-a", { ready: false, inUse: [uniqueVolumeName(driver, "h-pv1")] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [
          va("pv1", "node-a", { annotations: { [annDetachRequestedAt]: "2026-01-01T00:03:59Z" } }),
        ],
      },
      want: ["delete-attachment pv1@node-a"],
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
      name: "an out-of-service node counts as unhealthy",
      in: {
        node: node("node-a", { outOfService: true, inUse: [uniqueVolumeName(driver, "h-pv1")] }),
        volumes: [pv("pv1", "c", { lock: "node-a" })],
        attachments: [
          va("pv1", "node-a", { annotations: { [annDetachRequestedAt]: "2026-01-01T00:00:00Z" } }),
        ],
      },
      want: ["delete-attachment pv1@node-a"],
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
