// The sandbox scheduler against the real sandbox API server: pods bound
// through pods/binding, a WaitForFirstConsumer claim given a node that fits
// its class (and given one again when the provisioner clears it), a bound
// claim's PV node affinity honoured, a pod held back by an unbound
// Immediate claim marked Unschedulable. The test plays provisioner and binder.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeConfig } from "@kubernetes/client-node";
import { type Sandbox, startSandbox } from "../../sandbox/start.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  events,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  storageClasses,
} from "../../shared/kube/resources.ts";
import type { KubeEvent, PersistentVolume, PersistentVolumeClaim, Pod } from "../../shared/kube/types.ts";
import { annSelectedNode } from "../../shared/kube/well-known.ts";
import { eventually } from "../helpers/eventually.ts";

const driver = "hostpath.csi.k8s.io";
let dir: string;
let sandbox: Sandbox;
let kube: KubeJsonClient;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-scheduler-"));
  // The scheduler alone: the test decides when claims are bound.
  sandbox = await startSandbox({ dir, kubelets: false });
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfigPath);
  kube = new KubeJsonClient(kc);
  await kube.create(storageClasses, {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: "zone-b" },
    provisioner: driver,
    volumeBindingMode: "WaitForFirstConsumer",
    allowedTopologies: [
      { matchLabelExpressions: [{ key: "topology.kubernetes.io/zone", values: ["sandbox-zone-b"] }] },
    ],
  });
  await kube.create(storageClasses, {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: "immediate" },
    provisioner: driver,
    volumeBindingMode: "Immediate",
  });
});
after(async () => {
  await kube.close();
  await sandbox.close();
  await rm(dir, { recursive: true, force: true });
});

const getPod = (name: string) => kube.get<Pod>(pods, name, "default");
const getClaim = (name: string) => kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, "default");

async function createPod(name: string, claim?: string): Promise<Pod> {
  return kube.create<Pod>(pods, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default" },
    spec: {
      containers: [{ name: "app", image: "busybox" }],
      ...(claim ? { volumes: [{ name: "data", persistentVolumeClaim: { claimName: claim } }] } : {}),
    },
  });
}

async function createClaim(
  name: string,
  className: string,
  volumeName?: string,
): Promise<PersistentVolumeClaim> {
  return kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      storageClassName: className,
      ...(volumeName ? { volumeName } : {}),
    },
  });
}

/** A PV on one node, bound to the claim both ways, as provisioner and binder leave it. */
async function bindClaim(claimName: string, pvName: string, hostname: string): Promise<void> {
  const claim = await getClaim(claimName);
  await kube.create<PersistentVolume>(persistentVolumes, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: pvName },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      csi: { driver, volumeHandle: pvName },
      claimRef: {
        kind: "PersistentVolumeClaim",
        namespace: "default",
        name: claimName,
        uid: claim.metadata.uid,
      },
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [hostname] }] },
          ],
        },
      },
      storageClassName: claim.spec.storageClassName ?? "",
    },
  });
  const withVolume = await kube.replace(persistentVolumeClaims, {
    ...claim,
    spec: { ...claim.spec, volumeName: pvName },
  });
  await kube.replace(
    persistentVolumeClaims,
    { ...withVolume, status: { phase: "Bound" } },
    { subresource: "status" },
  );
}

const condition = (p: Pod, type: string) =>
  (
    p.status?.conditions as { type: string; status: string; reason?: string; message?: string }[] | undefined
  )?.find((c) => c.type === type);

describe("sandbox scheduler", () => {
  it("binds a plain pod to a sandbox node through pods/binding, with PodScheduled and a Scheduled event", async () => {
    await createPod("plain");
    const bound = await eventually("bound", async () => {
      const p = await getPod("plain");
      return p.spec.nodeName ? p : undefined;
    });
    assert.ok(sandbox.nodeNames.includes(bound.spec.nodeName!), bound.spec.nodeName);
    assert.equal(condition(bound, "PodScheduled")?.status, "True");
    const scheduled = await eventually("Scheduled event", async () => {
      const list = await kube.list<KubeEvent>(events, { namespace: "default" });
      return list.items.find((e) => e.reason === "Scheduled" && e.involvedObject.name === "plain");
    });
    assert.equal(scheduled.message, `Successfully assigned default/plain to ${bound.spec.nodeName}`);
  });

  it("gives a WaitForFirstConsumer claim a node fitting allowedTopologies, again after a reschedule, and binds the pod once the claim is bound", async () => {
    await createClaim("wffc", "zone-b");
    await createPod("wffc-pod", "wffc");
    const selected = await eventually(
      "selected-node",
      async () => (await getClaim("wffc")).metadata.annotations?.[annSelectedNode],
    );
    assert.equal(selected, "sandbox-node-2");
    await sleep(300);
    assert.equal(
      (await getPod("wffc-pod")).spec.nodeName,
      undefined,
      "the pod waits for the claim to be bound",
    );

    // The provisioner gives the node back (ProvisioningReschedule): the scheduler picks again.
    const claim = await getClaim("wffc");
    const annotations = { ...claim.metadata.annotations };
    delete annotations[annSelectedNode];
    await kube.replace(persistentVolumeClaims, { ...claim, metadata: { ...claim.metadata, annotations } });
    const again = await eventually("selected-node again", async () => {
      const c = await getClaim("wffc");
      return c.metadata.resourceVersion !== claim.metadata.resourceVersion
        ? c.metadata.annotations?.[annSelectedNode]
        : undefined;
    });
    assert.equal(again, "sandbox-node-2");

    await bindClaim("wffc", "pv-wffc", "sandbox-node-2");
    const bound = await eventually("bound", async () => {
      const p = await getPod("wffc-pod");
      return p.spec.nodeName ? p : undefined;
    });
    assert.equal(bound.spec.nodeName, "sandbox-node-2");
  });

  it("pre-binds an Available local PV to a WaitForFirstConsumer claim on the PV's node, and binds the pod once the claim is bound", async () => {
    await kube.create(storageClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "local" },
      provisioner: "kubernetes.io/no-provisioner",
      volumeBindingMode: "WaitForFirstConsumer",
    });
    const created = await kube.create<PersistentVolume>(persistentVolumes, {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "local-pv" },
      spec: {
        accessModes: ["ReadWriteOnce"],
        capacity: { storage: "5Gi" },
        local: { path: "/mnt/disks/a" },
        storageClassName: "local",
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              {
                matchExpressions: [
                  { key: "kubernetes.io/hostname", operator: "In", values: ["sandbox-node-2"] },
                ],
              },
            ],
          },
        },
      },
    });
    await kube.replace(
      persistentVolumes,
      { ...created, status: { phase: "Available" } },
      { subresource: "status" },
    );
    const claim = await createClaim("local-data", "local");
    await createPod("local-pod", "local-data");
    const prebound = await eventually("claimRef", async () => {
      const pv = await kube.get<PersistentVolume>(persistentVolumes, "local-pv");
      return pv.spec.claimRef ? pv : undefined;
    });
    assert.deepEqual(
      [prebound.spec.claimRef?.name, prebound.spec.claimRef?.uid],
      ["local-data", claim.metadata.uid],
    );
    assert.equal(prebound.metadata.annotations?.["pv.kubernetes.io/bound-by-controller"], "yes");
    assert.equal((await getClaim("local-data")).metadata.annotations?.[annSelectedNode], undefined);
    await sleep(300);
    assert.equal((await getPod("local-pod")).spec.nodeName, undefined, "the pod waits for the binder");
    // The binder's part: the claim takes the PV.
    const c = await getClaim("local-data");
    const withVolume = await kube.replace(persistentVolumeClaims, {
      ...c,
      spec: { ...c.spec, volumeName: "local-pv" },
    });
    await kube.replace(
      persistentVolumeClaims,
      { ...withVolume, status: { phase: "Bound" } },
      { subresource: "status" },
    );
    const bound = await eventually("bound", async () => {
      const p = await getPod("local-pod");
      return p.spec.nodeName ? p : undefined;
    });
    assert.equal(bound.spec.nodeName, "sandbox-node-2");
  });

  it("honours a bound claim's PV node affinity", async () => {
    await createClaim("pinned", "immediate");
    await bindClaim("pinned", "pv-pinned", "sandbox-node-2");
    // Without the PV, the emptier first node would win.
    await createPod("pinned-pod", "pinned");
    const bound = await eventually("bound", async () => {
      const p = await getPod("pinned-pod");
      return p.spec.nodeName ? p : undefined;
    });
    assert.equal(bound.spec.nodeName, "sandbox-node-2");
  });

  it("holds a pod with an unbound Immediate claim back as Unschedulable, and binds it once the claim is bound", async () => {
    await createClaim("later", "immediate");
    await createPod("waiting", "later");
    const marked = await eventually("Unschedulable", async () => {
      const c = condition(await getPod("waiting"), "PodScheduled");
      return c?.status === "False" ? c : undefined;
    });
    assert.equal(marked.reason, "Unschedulable");
    assert.equal(
      marked.message,
      "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
    );
    assert.equal((await getPod("waiting")).spec.nodeName, undefined);
    await bindClaim("later", "pv-later", "sandbox-node");
    const bound = await eventually("bound", async () => {
      const p = await getPod("waiting");
      return p.spec.nodeName ? p : undefined;
    });
    assert.equal(bound.spec.nodeName, "sandbox-node");
    assert.equal(condition(bound, "PodScheduled")?.status, "True");
  });

  it("leaves gated pods and other schedulers' pods alone", async () => {
    for (const [name, extra] of [
      ["gated", { schedulingGates: [{ name: "example.com/wait" }] }],
      ["not-ours", { schedulerName: "other-scheduler" }],
    ] as const) {
      await kube.create<Pod>(pods, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace: "default" },
        spec: { containers: [{ name: "app", image: "busybox" }], ...extra },
      });
    }
    await sleep(1500);
    for (const name of ["gated", "not-ours"]) {
      const p = await getPod(name);
      assert.equal(p.spec.nodeName, undefined, name);
      assert.equal(condition(p, "PodScheduled"), undefined, name);
    }
  });

  it("leaves a pod whose claim does not exist Pending", async () => {
    await createPod("orphan", "no-such-claim");
    const marked = await eventually("Unschedulable", async () => {
      const c = condition(await getPod("orphan"), "PodScheduled");
      return c?.status === "False" ? c : undefined;
    });
    assert.equal(marked.message, '0/2 nodes are available: persistentvolumeclaim "no-such-claim" not found.');
    assert.equal((await getPod("orphan")).status?.phase, "Pending");
  });
});
