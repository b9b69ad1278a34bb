// What the sandbox kubelet mounts for a pod, as a table: claims, PVs and
// CSIDrivers in, the CSI volumes to mount (or why the pod waits) out; and
// the kubelet's names and paths for a volume.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type PodVolumes, resolvePodVolumes } from "../../sandbox/kubelet/pod-volumes.ts";
import { stagingPath, targetPath } from "../../sandbox/kubelet/volume-paths.ts";
import { uniqueVolumeName, volumeAttachmentName } from "../../shared/attach-detach/volume-attachment-name.ts";
import type { CSIDriver, PersistentVolume, PersistentVolumeClaim, Pod } from "../../shared/kube/types.ts";

const driver = "hostpath.csi.k8s.io";

function pod(volumes: Pod["spec"]["volumes"]): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web", namespace: "ns", uid: "u1" },
    spec: { volumes },
  };
}

function claim(name: string, volumeName?: string, phase = "Bound"): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "ns", uid: `uid-${name}` },
    spec: { ...(volumeName ? { volumeName } : {}) },
    status: { phase },
  };
}

function pv(name: string, claimUid: string, extra: Partial<PersistentVolume["spec"]> = {}): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      accessModes: ["ReadWriteOnce"],
      claimRef: { namespace: "ns", name: "data", uid: claimUid },
      csi: { driver, volumeHandle: `h-${name}`, fsType: "xfs", volumeAttributes: { k: "v" } },
      ...extra,
    },
  };
}

interface Row {
  name: string;
  pod: Pod;
  claims?: PersistentVolumeClaim[];
  volumes?: PersistentVolume[];
  drivers?: CSIDriver[];
  want: PodVolumes;
}

const mountable = {
  uniqueName: `kubernetes.io/csi/${driver}^h-pv-1`,
  pvName: "pv-1",
  driver,
  volumeHandle: "h-pv-1",
  attachRequired: true,
  block: false,
  capability: {
    mount: { fsType: "xfs", mountFlags: [] },
    accessMode: { mode: "SINGLE_NODE_WRITER" as const },
  },
  readonly: false,
  volumeContext: { k: "v" },
};

const rows: Row[] = [
  { name: "no claims: nothing to mount", pod: pod([{ name: "tmp" }]), want: { ready: true, volumes: [] } },
  {
    name: "a bound claim of a driver without CSIDriver needs an attach",
    pod: pod([{ name: "d", persistentVolumeClaim: { claimName: "data" } }]),
    claims: [claim("data", "pv-1")],
    volumes: [pv("pv-1", "uid-data")],
    want: { ready: true, volumes: [mountable] },
  },
  {
    name: "attachRequired false, read-only claim, block mode, RWX",
    pod: pod([{ name: "d", persistentVolumeClaim: { claimName: "data", readOnly: true } }]),
    claims: [claim("data", "pv-1")],
    volumes: [pv("pv-1", "uid-data", { volumeMode: "Block", accessModes: ["ReadWriteMany"] })],
    drivers: [
      {
        apiVersion: "storage.k8s.io/v1",
        kind: "CSIDriver",
        metadata: { name: driver },
        spec: { attachRequired: false },
      },
    ],
    want: {
      ready: true,
      volumes: [
        {
          ...mountable,
          attachRequired: false,
          block: true,
          capability: { block: {}, accessMode: { mode: "MULTI_NODE_MULTI_WRITER" } },
          readonly: true,
        },
      ],
    },
  },
  {
    name: "a missing claim",
    pod: pod([{ name: "d", persistentVolumeClaim: { claimName: "data" } }]),
    want: { ready: false, reason: 'persistentvolumeclaim "data" not found' },
  },
  {
    name: "a claim not bound yet",
    pod: pod([{ name: "d", persistentVolumeClaim: { claimName: "data" } }]),
    claims: [claim("data", undefined, "Pending")],
    want: { ready: false, reason: "PVC ns/data is not bound" },
  },
  {
    name: "a PV bound to another claim",
    pod: pod([{ name: "d", persistentVolumeClaim: { claimName: "data" } }]),
    claims: [claim("data", "pv-1")],
    volumes: [pv("pv-1", "someone-else")],
    want: { ready: false, reason: "PV pv-1 is not bound back to PVC ns/data" },
  },
  {
    name: "a generic ephemeral volume's claim is <pod>-<volume>",
    pod: pod([{ name: "scratch", ephemeral: { volumeClaimTemplate: {} } }]),
    want: { ready: false, reason: 'persistentvolumeclaim "web-scratch" not found' },
  },
];

describe("resolvePodVolumes", () => {
  for (const row of rows) {
    it(row.name, () => {
      const got = resolvePodVolumes(row.pod, {
        claim: (ns, name) => row.claims?.find((c) => c.metadata.namespace === ns && c.metadata.name === name),
        volume: (name) => row.volumes?.find((v) => v.metadata.name === name),
        csiDriver: (name) => row.drivers?.find((d) => d.metadata.name === name),
      });
      assert.deepEqual(got, row.want);
    });
  }
});

describe("volume names and paths", () => {
  it("are the kubelet's and the attach/detach controller's", () => {
    assert.equal(uniqueVolumeName(driver, "vol-1"), "kubernetes.io/csi/hostpath.csi.k8s.io^vol-1");
    // sha256(handle + driver + node), as the CSI attacher names VolumeAttachments.
    assert.equal(
      volumeAttachmentName("vol-1", driver, "node-a"),
      "csi-5a70c5de395ccad5e79daeb27c7c4f2634b675e6e1bb2a397999a016143bc9fb",
    );
    // sha256(handle) names the global mount directory.
    assert.equal(
      stagingPath("/var/lib/kubelet", driver, "vol-1", "pv-1", false),
      "/var/lib/kubelet/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/d2e8363faaac7ae76def3b14091d8eb5755f6b92e9531627aeec833a8731cc49/globalmount",
    );
    assert.equal(
      targetPath("/var/lib/kubelet", "u1", "pv-1", false),
      "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv-1/mount",
    );
    assert.equal(
      stagingPath("/var/lib/kubelet", driver, "vol-1", "pv-1", true),
      "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pv-1",
    );
    assert.equal(
      targetPath("/var/lib/kubelet", "u1", "pv-1", true),
      "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pv-1/u1",
    );
  });
});
