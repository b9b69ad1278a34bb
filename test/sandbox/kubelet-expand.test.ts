// The sandbox kubelet's node half of volume expansion against the real
// sandbox (API server over HTTP, CSI driver over gRPC). The test plays the
// resizer: ControllerExpandVolume on the driver, the PV's capacity raised,
// and the claim left as the resizer leaves it when the node must finish
// (capacity unchanged, allocatedResources, NodeResizePending, Resizing and
// FileSystemResizePending). The kubelet then calls NodeExpandVolume, online
// for a running pod or at mount time for a new one, and records the size.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeConfig } from "@kubernetes/client-node";
import { type KubeletStep, type Sandbox, startSandbox } from "../../sandbox/start.ts";
import { uniqueVolumeName, volumeAttachmentName } from "../../shared/attach-detach/volume-attachment-name.ts";
import { isNotFound } from "../../shared/kube/api-errors.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  events,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  secrets,
  volumeAttachments,
} from "../../shared/kube/resources.ts";
import type {
  KubeEvent,
  KubeObject,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
} from "../../shared/kube/types.ts";
import { mountCap, type RawCsiClient, rawCsiClient } from "../helpers/csi-driver-client.ts";
import { eventually } from "../helpers/eventually.ts";

const driver = "hostpath.csi.k8s.io";
const node = "sandbox-node-2";
const GiB = 1024 ** 3;

let dir: string;
let sandbox: Sandbox;
let kube: KubeJsonClient;
let csi: RawCsiClient;
const steps: KubeletStep[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-kubelet-expand-"));
  sandbox = await startSandbox({ dir, onKubeletStep: (s) => steps.push(s) });
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfigPath);
  kube = new KubeJsonClient(kc);
  csi = rawCsiClient(sandbox.csi.endpoint);
});
after(async () => {
  csi.close();
  await kube.close();
  await sandbox.close();
  await rm(dir, { recursive: true, force: true });
});

async function getPod(name: string): Promise<Pod | undefined> {
  try {
    return await kube.get<Pod>(pods, name, "default");
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

const getClaim = (name: string) => kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, "default");

/** A 1Gi volume in the driver, attached to the node, and a claim bound to its PV both ways. */
async function boundClaim(
  name: string,
  csiExtra: Record<string, unknown> = {},
): Promise<{ handle: string; pv: string }> {
  const created = await csi.call<{ volume: { volume_id: string } }>("Controller", "CreateVolume", {
    name: `vol-${name}`,
    capacity_range: { required_bytes: GiB },
    volume_capabilities: [mountCap()],
  });
  const handle = created.volume.volume_id;
  const pvName = `pv-${name}`;
  const claim = await kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      volumeName: pvName,
      storageClassName: "",
    },
  });
  const pv = await kube.create<PersistentVolume>(persistentVolumes, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: pvName },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      csi: { driver, volumeHandle: handle, fsType: "ext4", ...csiExtra },
      claimRef: { kind: "PersistentVolumeClaim", namespace: "default", name, uid: claim.metadata.uid },
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName: "",
    },
  });
  await kube.replace(persistentVolumes, { ...pv, status: { phase: "Bound" } }, { subresource: "status" });
  await kube.replace(
    persistentVolumeClaims,
    { ...claim, status: { phase: "Bound", accessModes: ["ReadWriteOnce"], capacity: { storage: "1Gi" } } },
    { subresource: "status" },
  );
  // What the attacher and the attach/detach controller would do.
  await csi.call("Controller", "ControllerPublishVolume", {
    volume_id: handle,
    node_id: node,
    volume_capability: mountCap(),
  });
  const va = await kube.create<KubeObject>(volumeAttachments, {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: volumeAttachmentName(handle, driver, node) },
    spec: { attacher: driver, nodeName: node, source: { persistentVolumeName: pvName } },
  });
  await kube.replace(
    volumeAttachments,
    { ...va, status: { attached: true, attachmentMetadata: {} } },
    { subresource: "status" },
  );
  const attached = (await kube.get<KubeObject>(nodes, node)).status as
    | { volumesAttached?: { name: string; devicePath: string }[] }
    | undefined;
  await kube.patch(
    nodes,
    node,
    undefined,
    {
      status: {
        volumesAttached: [
          ...(attached?.volumesAttached ?? []),
          { name: uniqueVolumeName(driver, handle), devicePath: "" },
        ],
      },
    },
    "merge",
    { subresource: "status" },
  );
  return { handle, pv: pvName };
}

async function createPod(name: string, claim: string): Promise<Pod> {
  return kube.create<Pod>(pods, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default" },
    spec: {
      nodeName: node,
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: claim } }],
    },
  });
}

async function running(name: string): Promise<Pod> {
  return eventually(`${name} Running`, async () => {
    const p = await getPod(name);
    return p?.status?.phase === "Running" ? p : undefined;
  });
}

/** The resizer's work for a driver that needs node expansion: volume and PV at 2Gi, the claim waiting for the node. */
async function resizerLeaves(claimName: string, handle: string, pvName: string): Promise<void> {
  await csi.call("Controller", "ControllerExpandVolume", {
    volume_id: handle,
    capacity_range: { required_bytes: 2 * GiB },
    volume_capability: mountCap(),
  });
  await kube.patch(persistentVolumes, pvName, undefined, { spec: { capacity: { storage: "2Gi" } } }, "merge");
  const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  await kube.patch(
    persistentVolumeClaims,
    claimName,
    "default",
    {
      status: {
        allocatedResources: { storage: "2Gi" },
        allocatedResourceStatuses: { storage: "NodeResizePending" },
        conditions: [
          { type: "Resizing", status: "True", lastTransitionTime: now },
          {
            type: "FileSystemResizePending",
            status: "True",
            lastTransitionTime: now,
            message: "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
          },
        ],
      },
    },
    "merge",
    { subresource: "status" },
  );
}

async function eventsOf(name: string): Promise<KubeEvent[]> {
  const list = await kube.list<KubeEvent>(events, { namespace: "default" });
  return list.items.filter((e) => e.involvedObject.name === name);
}

const backing = (handle: string) =>
  sandbox.csi.driver.listBackingVolumes().find((v) => v.volumeId === handle)! as {
    nodeCapacityBytes?: number;
  };

/** The claim as a finished expansion leaves it. */
function assertExpanded(claim: PersistentVolumeClaim): void {
  assert.deepEqual(claim.status?.capacity, { storage: "2Gi" });
  assert.equal(claim.status?.allocatedResourceStatuses, undefined);
  assert.deepEqual(claim.status?.conditions ?? [], []);
  // allocatedResources stays: it is the resizer's record of what it expanded to.
  assert.deepEqual(claim.status?.allocatedResources, { storage: "2Gi" });
}

describe("sandbox kubelet: node expansion", () => {
  it("expands the volume of a running pod online and records the size on the claim", async () => {
    const { handle, pv } = await boundClaim("online");
    await createPod("app-online", "online");
    await running("app-online");
    assert.equal(backing(handle).nodeCapacityBytes, GiB);

    await resizerLeaves("online", handle, pv);
    const claim = await eventually("claim expanded", async () => {
      const c = await getClaim("online");
      return c.status?.capacity?.storage === "2Gi" ? c : undefined;
    });
    assertExpanded(claim);
    assert.equal(backing(handle).nodeCapacityBytes, 2 * GiB, "NodeExpandVolume grew the filesystem");
    const step = steps.find((s) => s.step === "expanded" && s.pod === "default/app-online");
    assert.deepEqual(step, {
      step: "expanded",
      node,
      pod: "default/app-online",
      volume: uniqueVolumeName(driver, handle),
      size: "2Gi",
      online: true,
    });
    const message = `MountVolume.NodeExpandVolume succeeded for volume "${pv}" ${node}`;
    for (const object of ["app-online", "online"]) {
      const ok = await eventually(`FileSystemResizeSuccessful on ${object}`, async () =>
        (await eventsOf(object)).find((e) => e.reason === "FileSystemResizeSuccessful"),
      );
      assert.equal(ok.type, "Normal");
      assert.equal(ok.message, message);
    }
    // Done once: the pod stays Running and nothing is expanded again.
    await sleep(800);
    assert.equal(steps.filter((s) => s.step === "expanded" && s.pod === "default/app-online").length, 1);
    assert.equal((await getPod("app-online"))?.status?.phase, "Running");
  });

  it("a failed expansion at mount time keeps the pod ContainerCreating with FailedMount until it works", async () => {
    const { handle, pv } = await boundClaim("mount-retry");
    await resizerLeaves("mount-retry", handle, pv);
    sandbox.csi.driver.setFaults({
      methods: ["NodeExpandVolume"],
      errorProbability: 1,
      errorCodes: ["INTERNAL"],
    });
    try {
      await createPod("app-mount-retry", "mount-retry");
      const failed = await eventually("FailedMount", async () =>
        (await eventsOf("app-mount-retry")).find((e) => e.reason === "FailedMount"),
      );
      assert.equal(failed.type, "Warning");
      assert.match(
        String(failed.message),
        new RegExp(
          `^MountVolume\\.Setup failed while expanding volume for volume "${pv}" : Expander\\.NodeExpand failed to expand the volume: rpc error: code = Internal`,
        ),
      );
      const pending = await getPod("app-mount-retry");
      assert.equal(pending?.status?.phase, "Pending", "the pod does not run on an unexpanded volume");
      const claim = await getClaim("mount-retry");
      assert.equal(claim.status?.allocatedResourceStatuses?.storage, "NodeResizeInProgress");
      assert.ok(claim.status?.conditions?.some((c) => c.type === "NodeResizeError"));
    } finally {
      sandbox.csi.driver.setFaults({});
    }
    await eventually(
      "Running after the retry",
      async () => ((await getPod("app-mount-retry"))?.status?.phase === "Running" ? true : undefined),
      60_000,
    );
    assertExpanded(await getClaim("mount-retry"));
  });

  it("expands at mount time for a new pod before it runs", async () => {
    const { handle, pv } = await boundClaim("at-mount");
    await resizerLeaves("at-mount", handle, pv);
    await createPod("app-at-mount", "at-mount");
    await running("app-at-mount");
    // The pod runs only once the claim's size is recorded.
    assertExpanded(await getClaim("at-mount"));
    assert.equal(backing(handle).nodeCapacityBytes, 2 * GiB);
    const step = steps.find((s) => s.step === "expanded" && s.pod === "default/app-at-mount");
    assert.equal(step?.step === "expanded" && step.online, false);
  });

  it("a final error leaves NodeResizeError and retries; once the driver works, the claim is finished", async () => {
    const { handle, pv } = await boundClaim("retry");
    await createPod("app-retry", "retry");
    await running("app-retry");
    sandbox.csi.driver.setFaults({
      methods: ["NodeExpandVolume"],
      errorProbability: 1,
      errorCodes: ["INTERNAL"],
    });
    try {
      await resizerLeaves("retry", handle, pv);
      const failed = await eventually("NodeResizeError", async () => {
        const c = await getClaim("retry");
        return c.status?.conditions?.some((x) => x.type === "NodeResizeError") ? c : undefined;
      });
      assert.equal(failed.status?.allocatedResourceStatuses?.storage, "NodeResizeInProgress");
      assert.deepEqual(failed.status?.capacity, { storage: "1Gi" });
      const error = failed.status?.conditions?.find((x) => x.type === "NodeResizeError");
      assert.match(
        String(error?.message),
        /^failed to expand pvc with Expander\.NodeExpand failed to expand the volume: rpc error: code = Internal desc = /,
      );
      const warning = await eventually("VolumeResizeFailed", async () =>
        (await eventsOf("app-retry")).find((e) => e.reason === "VolumeResizeFailed"),
      );
      assert.equal(warning.type, "Warning");
      assert.match(
        String(warning.message),
        new RegExp(`^NodeExpandVolume\\.NodeExpandVolume failed for volume "${pv}" : `),
      );
      assert.equal((await getPod("app-retry"))?.status?.phase, "Running", "a running pod keeps running");
    } finally {
      sandbox.csi.driver.setFaults({});
    }
    const claim = await eventually(
      "claim expanded after the retry",
      async () => {
        const c = await getClaim("retry");
        return c.status?.capacity?.storage === "2Gi" ? c : undefined;
      },
      60_000,
    );
    assertExpanded(claim);
  });

  it("an infeasible error (InvalidArgument) marks NodeResizeInfeasible and is not retried", async () => {
    const { handle, pv } = await boundClaim("infeasible");
    await createPod("app-infeasible", "infeasible");
    await running("app-infeasible");
    sandbox.csi.driver.setFaults({
      methods: ["NodeExpandVolume"],
      errorProbability: 1,
      errorCodes: ["INVALID_ARGUMENT"],
    });
    try {
      await resizerLeaves("infeasible", handle, pv);
      const claim = await eventually("NodeResizeInfeasible", async () => {
        const c = await getClaim("infeasible");
        return c.status?.allocatedResourceStatuses?.storage === "NodeResizeInfeasible" ? c : undefined;
      });
      const error = claim.status?.conditions?.find((x) => x.type === "NodeResizeError");
      assert.match(
        String(error?.message),
        /^failed to expand pvc with Expander\.NodeExpand failed to expand the volume rpc error: code = InvalidArgument/,
      );
      assert.ok(claim.status?.conditions?.some((x) => x.type === "FileSystemResizePending"));
      assert.deepEqual(claim.status?.capacity, { storage: "1Gi" });
      sandbox.csi.driver.setFaults({});
      // Infeasible is the resizer's to take up again: the kubelet leaves it.
      await sleep(1500);
      const later = await getClaim("infeasible");
      assert.equal(later.status?.allocatedResourceStatuses?.storage, "NodeResizeInfeasible");
      assert.deepEqual(later.status?.capacity, { storage: "1Gi" });
      assert.equal(backing(handle).nodeCapacityBytes, GiB);
    } finally {
      sandbox.csi.driver.setFaults({});
    }
  });
});

describe("sandbox kubelet: node expansion, the secret and the capability", () => {
  it("reads nodeExpandSecretRef: a missing secret is retried without touching the claim, then expands", async () => {
    const { handle, pv } = await boundClaim("secret", {
      nodeExpandSecretRef: { name: "expand-secret", namespace: "default" },
    });
    await createPod("app-secret", "secret");
    await running("app-secret");
    await resizerLeaves("secret", handle, pv);
    const warning = await eventually("VolumeResizeFailed", async () =>
      (await eventsOf("app-secret")).find((e) => e.reason === "VolumeResizeFailed"),
    );
    assert.match(String(warning.message), /failed to get NodeExpandSecretRef: .*"expand-secret" not found/);
    const waiting = await getClaim("secret");
    assert.deepEqual(waiting.status?.capacity, { storage: "1Gi" });
    assert.equal(
      waiting.status?.conditions?.some((c) => c.type === "NodeResizeError"),
      false,
      "no CSI call was made, so no node resize error",
    );
    await kube.create<KubeObject>(secrets, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "expand-secret", namespace: "default" },
      stringData: { password: "open" },
    });
    const claim = await eventually(
      "claim expanded once the secret exists",
      async () => {
        const c = await getClaim("secret");
        return c.status?.capacity?.storage === "2Gi" ? c : undefined;
      },
      60_000,
    );
    assertExpanded(claim);
  });

  describe("a node plugin without EXPAND_VOLUME", () => {
    let saved: { sandbox: Sandbox; kube: KubeJsonClient; csi: RawCsiClient; dir: string };
    before(async () => {
      saved = { sandbox, kube, csi, dir };
      dir = await mkdtemp(join(tmpdir(), "ksf-kubelet-no-expand-"));
      sandbox = await startSandbox({
        dir,
        csi: { nodeCapabilities: ["STAGE_UNSTAGE_VOLUME"] },
        onKubeletStep: (s) => steps.push(s),
      });
      const kc = new KubeConfig();
      kc.loadFromFile(sandbox.kubeconfigPath);
      kube = new KubeJsonClient(kc);
      csi = rawCsiClient(sandbox.csi.endpoint);
    });
    after(async () => {
      csi.close();
      await kube.close();
      await sandbox.close();
      await rm(dir, { recursive: true, force: true });
      ({ sandbox, kube, csi, dir } = saved);
    });

    it("leaves the claim to the resizer: no NodeExpandVolume, no claim write", async () => {
      const { handle, pv } = await boundClaim("no-node");
      await createPod("app-no-node", "no-node");
      await running("app-no-node");
      await resizerLeaves("no-node", handle, pv);
      const left = await getClaim("no-node");
      await sleep(1500);
      const later = await getClaim("no-node");
      assert.equal(
        later.metadata.resourceVersion,
        left.metadata.resourceVersion,
        "the kubelet wrote nothing",
      );
      assert.equal(later.status?.allocatedResourceStatuses?.storage, "NodeResizePending");
      assert.equal(
        steps.some((s) => s.step === "expanded" && s.pod === "default/app-no-node"),
        false,
      );
      assert.equal(
        (await eventsOf("app-no-node")).some((e) => e.reason?.startsWith("FileSystemResize")),
        false,
      );
    });
  });
});
