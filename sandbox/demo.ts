// The `npm start` demo: one claim and one pod through the whole system, the
// claim grown from 1Gi to 2Gi while the pod runs, and everything deleted
// again, printed as a timeline of what each part of the cluster did. The
// steps are read from the sandbox store's change feed (what a watch sees)
// and from the kubelets' step reports, not from the functions' logs.

import { persistentVolumeClaims, pods, storageClasses } from "../shared/kube/resources.ts";
import { annDefaultClass, annSelectedNode, annStorageProvisioner } from "../shared/kube/well-known.ts";
import type { StoredChange } from "./apiserver/store.ts";
import type { KubeletStep } from "./kubelet/kubelet.ts";
import type { RunningSystem } from "./system.ts";

const ns = "default";
const claimName = "demo-data";
const podName = "demo-app";

interface Seen {
  claim?: { phase?: string; volume?: string; node?: string; deleting: boolean };
  /** The claim's status.capacity.storage, as last written. */
  claimCapacity?: string;
  /** The kubelet's NodeExpandVolume step was seen. */
  nodeExpanded?: boolean;
  /** The PV's spec.capacity.storage, as first written (the size provisioned). */
  pvCapacity?: string;
  pvGone?: boolean;
  attachment?: string;
  attached?: boolean;
  listedOn?: string;
  unlisted?: boolean;
  attachmentGone?: boolean;
  podNode?: string;
  podRunning?: boolean;
  podGone?: boolean;
  claimGone?: boolean;
}

/** Lines printed once each, with the seconds since the demo started. */
class Timeline {
  private readonly printed = new Set<string>();
  private readonly t0 = Date.now();
  private readonly say: (line: string) => void;
  constructor(say: (line: string) => void) {
    this.say = say;
  }
  once(key: string, line: string): void {
    if (this.printed.has(key)) return;
    this.printed.add(key);
    this.say(`  +${((Date.now() - this.t0) / 1000).toFixed(1).padStart(4)}s  ${line}`);
  }
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v !== "" ? v : undefined;
}

/** What one committed change says about the demo's objects. */
function observe(c: StoredChange, seen: Seen, volumeHandle: () => string | undefined, t: Timeline): void {
  const o = c.object as {
    spec?: Record<string, unknown>;
    status?: Record<string, unknown>;
    metadata: {
      name?: string;
      namespace?: string;
      annotations?: Record<string, string>;
      deletionTimestamp?: string;
    };
  };
  const name = o.metadata.name;
  const deleted = c.type === "DELETED";
  switch (c.resource.plural) {
    case "persistentvolumeclaims": {
      if (name !== claimName || o.metadata.namespace !== ns) return;
      if (deleted) {
        seen.claimGone = true;
        t.once("claim-gone", `claim ${claimName} deleted (protection removed kubernetes.io/pvc-protection)`);
        return;
      }
      const node = o.metadata.annotations?.[annSelectedNode];
      if (node)
        t.once(
          "selected",
          `scheduler: claim ${claimName} waits for its first consumer; selected node ${node}`,
        );
      const provisioner = o.metadata.annotations?.[annStorageProvisioner];
      if (provisioner) t.once("handed", `claim handed to provisioner ${provisioner}`);
      if (str(o.status?.phase) === "Bound")
        t.once("bound", `binder: claim Bound to ${str(o.spec?.volumeName)}`);
      observeResize(o.status, seen, t);
      if (o.metadata.deletionTimestamp) t.once("claim-deleting", `claim ${claimName} Terminating`);
      return;
    }
    case "persistentvolumes": {
      const ref = o.spec?.claimRef as { name?: string } | undefined;
      if (ref?.name !== claimName) return;
      if (deleted) {
        seen.pvGone = true;
        t.once("pv-gone", `provisioner: DeleteVolume done, PersistentVolume ${name} deleted`);
      } else {
        t.once("pv", `provisioner: CreateVolume done, PersistentVolume ${name} created`);
        const size = str((o.spec?.capacity as { storage?: unknown } | undefined)?.storage);
        seen.pvCapacity ??= size;
        if (size && size !== seen.pvCapacity)
          t.once(
            "pv-grown",
            `resizer: ControllerExpandVolume done, PersistentVolume ${name} capacity ${size}`,
          );
        if (str(o.status?.phase) === "Released")
          t.once("released", `binder: PersistentVolume ${name} Released`);
      }
      return;
    }
    case "pods": {
      if (name !== podName || o.metadata.namespace !== ns) return;
      if (deleted) {
        seen.podGone = true;
        t.once("pod-gone", `pod ${podName} deleted`);
        return;
      }
      const node = str(o.spec?.nodeName);
      if (node) {
        seen.podNode = node;
        t.once("scheduled", `scheduler: pod ${podName} bound to node ${node}`);
      }
      if (str(o.status?.phase) === "Running") {
        seen.podRunning = true;
        t.once("running", `kubelet: pod ${podName} Running`);
      }
      return;
    }
    case "volumeattachments": {
      const source = o.spec?.source as { persistentVolumeName?: string } | undefined;
      const pv = source?.persistentVolumeName;
      if (!pv || (seen.attachment !== undefined && seen.attachment !== name)) return;
      if (!seen.attachment && !deleted) {
        seen.attachment = name;
        t.once(
          "va",
          `attach-detach: VolumeAttachment ${name?.slice(0, 16)}… for node ${str(o.spec?.nodeName)}`,
        );
      }
      if (deleted) {
        seen.attachmentGone = true;
        t.once("va-gone", "attacher: ControllerUnpublishVolume done, VolumeAttachment deleted (detached)");
      } else if (o.status?.attached === true) {
        seen.attached = true;
        t.once("attached", "attacher: ControllerPublishVolume done, attached");
      } else if (o.metadata.deletionTimestamp) t.once("detaching", "attach-detach: detaching");
      return;
    }
    case "nodes": {
      const handle = volumeHandle();
      if (!handle) return;
      const list = (o.status?.volumesAttached ?? []) as { name?: string }[];
      const listed = list.some((e) => e?.name?.endsWith(`^${handle}`));
      if (listed) {
        seen.listedOn = name;
        t.once("listed", `attach-detach: node ${name} lists the volume in status.volumesAttached`);
      } else if (seen.listedOn === name) {
        seen.unlisted = true;
        t.once("unlisted", `attach-detach: node ${name} no longer lists the volume`);
      }
      return;
    }
  }
}

/** The claim's expansion as the resizer and the kubelet record it in its status. */
function observeResize(status: Record<string, unknown> | undefined, seen: Seen, t: Timeline): void {
  const allocated = str((status?.allocatedResources as { storage?: unknown } | undefined)?.storage);
  const resize = str((status?.allocatedResourceStatuses as { storage?: unknown } | undefined)?.storage);
  const capacity = str((status?.capacity as { storage?: unknown } | undefined)?.storage);
  if (resize === "ControllerResizeInProgress" && allocated)
    t.once("resizing", `resizer: claim status ControllerResizeInProgress, allocatedResources ${allocated}`);
  if (resize === "NodeResizePending")
    t.once("fs-pending", "resizer: claim FileSystemResizePending (NodeResizePending), waiting for the node");
  if (capacity) seen.claimCapacity = capacity;
}

function describeKubeletStep(s: KubeletStep): [string, string] | undefined {
  switch (s.step) {
    case "volumes-in-use":
      return s.volumes.length > 0
        ? ["in-use", `kubelet (${s.node}): volume reported in status.volumesInUse`]
        : ["not-in-use", `kubelet (${s.node}): volume dropped from status.volumesInUse`];
    case "waiting-for-attach":
      return [
        "waiting",
        `kubelet (${s.node}): pod ContainerCreating, waiting for node status to list the volume`,
      ];
    case "staged":
      return ["staged", `kubelet (${s.node}): NodeStageVolume → ${s.path}`];
    case "published":
      return ["published", `kubelet (${s.node}): NodePublishVolume → ${s.path}`];
    case "unpublished":
      return ["unpublished", `kubelet (${s.node}): NodeUnpublishVolume`];
    case "unstaged":
      return ["unstaged", `kubelet (${s.node}): NodeUnstageVolume`];
    case "expanded":
      return [
        "expanded",
        `kubelet (${s.node}): NodeExpandVolume → ${s.size}${s.online ? " (online)" : " (at mount)"}, claim capacity recorded`,
      ];
    default:
      return undefined;
  }
}

async function until(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

/**
 * Runs the demo; `kubeletSteps` registers a listener for the kubelets' steps
 * (the system's onKubeletStep). Resolves false if a phase did not finish in time.
 */
export async function runDemo(
  system: RunningSystem,
  kubeletSteps: (listener: (s: KubeletStep) => void) => void,
  say: (line: string) => void,
): Promise<boolean> {
  const t = new Timeline(say);
  const seen: Seen = {};
  let handle: string | undefined;
  const unsubscribe = system.sandbox.apiServer.store.subscribe((c) => {
    if (c.resource.plural === "persistentvolumes") {
      const o = c.object as { spec?: { claimRef?: { name?: string }; csi?: { volumeHandle?: string } } };
      if (o.spec?.claimRef?.name === claimName) handle ??= o.spec.csi?.volumeHandle;
    }
    observe(c, seen, () => handle, t);
  });
  kubeletSteps((s) => {
    if (s.step === "expanded") seen.nodeExpanded = true;
    const line = describeKubeletStep(s);
    if (line) t.once(line[0], line[1]);
  });
  const { kube } = system;
  try {
    say("");
    say("Demo: a claim and a pod, through every function and back (kubectl would do the same):");
    await kube.create(storageClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "demo", annotations: { [annDefaultClass]: "true" } },
      provisioner: system.driverName,
      reclaimPolicy: "Delete",
      volumeBindingMode: "WaitForFirstConsumer",
      allowVolumeExpansion: true,
    });
    await kube.create(persistentVolumeClaims, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: claimName, namespace: ns },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
    });
    t.once("claim", `claim ${claimName} created without a class; admission set the default class "demo"`);
    await kube.create(pods, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: podName, namespace: ns },
      spec: {
        containers: [{ name: "app", image: "busybox" }],
        volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
      },
    });
    t.once("pod", `pod ${podName} created, using the claim`);
    if (!(await until(() => seen.podRunning === true, 60_000))) return false;

    say("");
    say("  Now growing the claim from 1Gi to 2Gi while the pod runs (kubectl patch pvc):");
    await kube.patch(
      persistentVolumeClaims,
      claimName,
      ns,
      { spec: { resources: { requests: { storage: "2Gi" } } } },
      "merge",
    );
    if (!(await until(() => seen.claimCapacity === "2Gi", 60_000))) return false;
    // The kubelet reports its step after writing the claim; a block volume has no node step.
    await until(() => seen.nodeExpanded === true, 2_000);
    t.once("claim-grown", `claim ${claimName}: status.capacity 2Gi, resize conditions and statuses cleared`);

    say("");
    say("  Now deleting the pod and the claim:");
    await kube.delete(pods, podName, ns);
    await kube.delete(persistentVolumeClaims, claimName, ns);
    return await until(
      () =>
        seen.podGone === true &&
        seen.attachmentGone === true &&
        seen.claimGone === true &&
        seen.pvGone === true,
      60_000,
    );
  } finally {
    unsubscribe();
  }
}
