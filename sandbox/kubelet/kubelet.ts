// One sandbox node's kubelet, for the storage part of its job: for the pods
// bound to its node it reports their attachable CSI volumes in the node's
// status.volumesInUse, waits until the attach/detach controller lists a
// volume in status.volumesAttached (and its VolumeAttachment is attached),
// then calls NodeStageVolume (when the node plugin stages) and
// NodePublishVolume on its node's CSI plugin, and marks the pod Running and
// Ready. A pod being deleted is torn down in the opposite order
// (NodeUnpublish, NodeUnstage once no other pod uses the volume, out of
// volumesInUse) and then deleted for good. What it has mounted lives in
// memory, as a kubelet's actual state of the world does; every CSI call is
// idempotent, so redoing one is harmless. When the node plugin has
// EXPAND_VOLUME it does the node half of volume expansion (NodeExpandVolume
// and the claim's status) at mount time and online for published volumes:
// the decisions are expand-plan.ts's.
import { join } from "node:path";
import { volumeAttachmentName } from "../../shared/attach-detach/volume-attachment-name.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { GrpcCode, grpcCodeName, grpcCodeOf, hasGrpcCode, isFinalCsiError } from "../../shared/csi/errors.ts";
import { isConflict, isNotFound } from "../../shared/kube/api-errors.ts";
import type { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { parseQuantityBytes } from "../../shared/kube/quantity.ts";
import {
  csiDrivers,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  type ResourceDescriptor,
  volumeAttachments,
} from "../../shared/kube/resources.ts";
import { readSecretData } from "../../shared/kube/secrets.ts";
import { rfc3339 } from "../../shared/kube/time.ts";
import type {
  CSIDriver,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  VolumeAttachment,
} from "../../shared/kube/types.ts";
import { isNodeReady } from "../cluster/node-ready.ts";
import { WatchLoop, type WatchLoopHost } from "../cluster/watch-loop.ts";
import {
  type ExpansionPlan,
  type ExpansionView,
  expandedMessage,
  expansionFailure,
  finishedPatch,
  inProgressPatch,
  mountExpansionFailedMessage,
  mountTimeExpansion,
  onlineExpansion,
  onlineExpansionFailedMessage,
  readOnlyMessage,
} from "./expand-plan.ts";
import {
  isFinished,
  type NodeVolumeState,
  podMayGo,
  podsToTearDown,
  volumesInUse,
  volumesToUnstage,
} from "./plan.ts";
import { podStatus, statusShape } from "./pod-status.ts";
import { type CsiVolumeToMount, resolvePodVolumes } from "./pod-volumes.ts";
import { stagingPath, targetPath } from "./volume-paths.ts";

/** What the kubelet did, for logs, demos and tests. */
export type KubeletStep =
  | { step: "volumes-in-use"; node: string; volumes: string[] }
  | { step: "waiting-for-attach"; node: string; pod: string; volume: string }
  | { step: "staged" | "unstaged"; node: string; volume: string; path: string }
  | { step: "published" | "unpublished"; node: string; pod: string; volume: string; path: string }
  | { step: "pod-running" | "pod-deleted"; node: string; pod: string }
  /** NodeExpandVolume succeeded; `online` when the volume was already published for a running pod. */
  | { step: "expanded"; node: string; pod: string; volume: string; size: string; online: boolean };

export interface SandboxKubeletOptions extends WatchLoopHost {
  nodeName: string;
  /** The node's CSI plugin (unix:///...). */
  csiEndpoint: string;
  /** The kubelet's root directory (/var/lib/kubelet on a real node). */
  rootDir: string;
  /** Pod IPs are <prefix>.<n>; default 10.244.0. */
  podIpPrefix?: string;
  /** Look at every pod again this often without a change; default 500 ms. */
  resyncMs?: number;
  onStep?: (step: KubeletStep) => void;
}

/** What a kubelet reads. */
export const kubeletKinds: readonly ResourceDescriptor[] = [
  pods,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  csiDrivers,
];

interface Mount {
  volume: CsiVolumeToMount;
  targetPath: string;
  /** Published and, when the claim called for it, expanded: the pod may use it. */
  ready: boolean;
  /**
   * NodePublishVolume failed without saying it did nothing (DEADLINE_EXCEEDED,
   * UNAVAILABLE...): upstream's uncertain mount. It may be published, so a pod
   * that goes tears it down; a pod that stays publishes it again.
   */
  uncertain?: boolean;
}

/** What an expansion did: the pod may use the volume ("done"), or a retry is due ("failed"). */
type ExpansionOutcome = { done: true } | { done: false; error: string };

const maxBackoffMs = 30_000;
const firstBackoffMs = 500;

function podKey(p: Pod): string {
  return `${p.metadata.namespace ?? "default"}/${p.metadata.name}`;
}

/** A volume the driver no longer has is mounted nowhere: its teardown is done. */
function ignoreGoneVolume(err: unknown): void {
  if (!hasGrpcCode(err, GrpcCode.NOT_FOUND)) throw err;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class SandboxKubelet {
  readonly nodeName: string;
  private readonly options: SandboxKubeletOptions;
  private readonly loop: WatchLoop;
  private readonly events: EventRecorder;
  private csi: CsiClient | undefined;
  private stages = false;
  private expands = false;
  private stopping = false;
  /**
   * unique volume name → staging path: volumes staged on this node. `uncertain`: NodeStageVolume
   * failed without saying it did nothing (upstream's uncertain device mount): the volume stays in
   * use, a pod that stays stages it again, and it is unstaged once no pod wants it, unless a
   * later attempt ends in a final error, which says nothing is staged.
   */
  private readonly staged = new Map<
    string,
    { path: string; volume: CsiVolumeToMount; uncertain?: boolean }
  >();
  /** pod uid → unique volume name → mount. */
  private readonly mounted = new Map<string, Map<string, Mount>>();
  /** pod uid → the volumes it ever had mounted here, so its deletion waits for their teardown. */
  private readonly podVolumes = new Map<string, Set<string>>();
  private readonly podIps = new Map<string, string>();
  private nextIp = 2;
  private readonly backoff = new Map<string, { until: number; failures: number }>();
  /** "<pod uid> <volume>" pairs already reported as waiting for attach (reported once). */
  private readonly waitingForAttach = new Set<string>();
  /** unique volume name → the claim size recorded for the mounted volume (the actual state's size). */
  private readonly recordedSizes = new Map<string, string>();
  /** Volumes whose driver answered FailedPrecondition to NodeExpandVolume: no online expansion until mounted anew. */
  private readonly expandInUseErrors = new Set<string>();
  /** Volumes whose last NodeExpandVolume failed with a final error. */
  private readonly expandFinalErrors = new Set<string>();
  /** Online expansions running, by unique volume name: one at a time per volume, never blocking the pass. */
  private readonly expanding = new Map<string, Promise<void>>();

  constructor(options: SandboxKubeletOptions) {
    this.options = options;
    this.nodeName = options.nodeName;
    this.loop = new WatchLoop(options, {
      name: `sandbox-kubelet-${options.nodeName}`,
      userAgent: `kubelet/${options.nodeName}`,
      kinds: kubeletKinds,
      pass: () => this.pass(),
      periodMs: options.resyncMs ?? 500,
    });
    this.events = this.loop.eventRecorder("kubelet", options.nodeName);
  }

  /** Connects to the node plugin (learning whether it stages) and starts watching. */
  async start(): Promise<void> {
    this.csi = await CsiClient.connect({
      endpoint: this.options.csiEndpoint,
      probe: { readyTimeoutMs: 10_000 },
    });
    const caps = await this.csi.nodeGetCapabilities();
    this.stages = caps.capabilities.some((c) => c.rpc?.type === "STAGE_UNSTAGE_VOLUME");
    this.expands = caps.capabilities.some((c) => c.rpc?.type === "EXPAND_VOLUME");
    await this.loop.start();
  }

  async stop(): Promise<void> {
    // No new online expansion from here; those running finish while the client still works.
    this.stopping = true;
    await Promise.allSettled([...this.expanding.values()]);
    await this.loop.stop();
    this.csi?.close();
  }

  private step(step: KubeletStep): void {
    try {
      this.options.onStep?.(step);
    } catch (err) {
      this.loop.log.warn({ err }, "onStep failed");
    }
  }

  private state(): NodeVolumeState {
    return { staged: this.staged, mounted: this.mounted };
  }

  private inBackoff(key: string): boolean {
    const b = this.backoff.get(key);
    return b !== undefined && b.until > Date.now();
  }

  private failed(key: string): void {
    const failures = (this.backoff.get(key)?.failures ?? 0) + 1;
    const delay = Math.min(maxBackoffMs, firstBackoffMs * 2 ** (failures - 1));
    this.backoff.set(key, { until: Date.now() + delay, failures });
  }

  private succeeded(key: string): void {
    this.backoff.delete(key);
  }

  /** One CSI call of a mount or a teardown: a failure backs `key` off and is told by `onFailure`. */
  private async attempt(
    key: string,
    call: () => Promise<unknown>,
    onFailure: (err: unknown) => unknown,
  ): Promise<boolean> {
    try {
      await call();
      return true;
    } catch (err) {
      this.failed(key);
      await onFailure(err);
      return false;
    }
  }

  /** A teardown call (NodeUnpublish, NodeUnstage) once `key` is out of backoff; a volume the driver no longer has counts as torn down. */
  private async tearDownCall(
    key: string,
    call: () => Promise<unknown>,
    onFailure: (err: unknown) => unknown,
  ): Promise<boolean> {
    if (this.inBackoff(key)) return false;
    const done = await this.attempt(key, () => call().catch(ignoreGoneVolume), onFailure);
    if (done) this.succeeded(key);
    return done;
  }

  /** Upstream's Warning Event for a failed volume operation of a pod. */
  private volumeWarning(pod: Pod | undefined, reason: string, operation: string, pvName: string) {
    return async (err: unknown): Promise<void> => {
      if (pod)
        await this.events.event(
          pod,
          "Warning",
          reason,
          `${operation} failed for volume "${pvName}" : ${messageOf(err)}`,
        );
    };
  }

  private async pass(): Promise<void> {
    const node = this.loop.cache.get<Node>(nodes, this.nodeName);
    if (!node || !this.csi) return;
    // A node marked not Ready stands for a node that is down: its kubelet does nothing until it is back.
    if (!isNodeReady(node)) return;
    const here = this.loop.cache.list<Pod>(pods).filter((p) => p.spec.nodeName === this.nodeName);
    const byUid = new Map(here.map((p) => [p.metadata.uid ?? "", p]));
    const active = here.filter((p) => !p.metadata.deletionTimestamp && !isFinished(p));

    const desired = new Map<string, CsiVolumeToMount[]>();
    const waiting = new Map<string, string>();
    for (const pod of active) {
      const resolved = resolvePodVolumes(pod, {
        claim: (ns, name) => this.loop.cache.get<PersistentVolumeClaim>(persistentVolumeClaims, name, ns),
        volume: (name) => this.loop.cache.get<PersistentVolume>(persistentVolumes, name),
        csiDriver: (name) => this.loop.cache.get<CSIDriver>(csiDrivers, name),
      });
      if (resolved.ready) desired.set(pod.metadata.uid ?? "", resolved.volumes);
      else waiting.set(pod.metadata.uid ?? "", resolved.reason);
    }
    const wanted = new Set([...desired.values()].flat().map((v) => v.uniqueName));

    await this.tearDown(byUid);
    await this.unstageUnused(wanted);
    this.forgetUnmountedVolumes();
    const inUse = await this.reportVolumesInUse(node, [...desired.values()].flat());
    await this.finishDeletions(here, wanted, inUse);

    for (const pod of active) {
      const uid = pod.metadata.uid ?? "";
      const volumes = desired.get(uid);
      let ready = volumes !== undefined;
      for (const volume of volumes ?? []) {
        if (!(await this.mount(pod, volume, node, inUse))) ready = false;
      }
      if (!ready && waiting.has(uid))
        this.loop.log.debug({ pod: podKey(pod), reason: waiting.get(uid) }, "waiting");
      await this.writeStatus(pod, node, ready);
    }
    this.startOnlineExpansions(byUid);
  }

  /** NodeUnpublish every volume of a pod that is gone, being deleted or finished. */
  private async tearDown(byUid: Map<string, Pod>): Promise<void> {
    for (const uid of podsToTearDown(this.state(), byUid)) {
      const mounts = this.mounted.get(uid)!;
      const pod = byUid.get(uid);
      const name = pod ? podKey(pod) : uid;
      for (const [unique, mount] of mounts) {
        const unpublished = await this.tearDownCall(
          `unpublish:${uid}:${unique}`,
          () =>
            this.csi!.nodeUnpublishVolume({
              volumeId: mount.volume.volumeHandle,
              targetPath: mount.targetPath,
            }),
          this.volumeWarning(pod, "FailedUnmount", "UnmountVolume.TearDown", mount.volume.pvName),
        );
        if (!unpublished) continue;
        mounts.delete(unique);
        this.step({
          step: "unpublished",
          node: this.nodeName,
          pod: name,
          volume: unique,
          path: mount.targetPath,
        });
      }
      if (mounts.size === 0) this.mounted.delete(uid);
    }
  }

  /** A volume neither staged nor published here leaves the actual state, and its recorded size and marks with it. */
  private forgetUnmountedVolumes(): void {
    const published = new Set([...this.mounted.values()].flatMap((m) => [...m.keys()]));
    for (const marks of [this.recordedSizes, this.expandInUseErrors, this.expandFinalErrors]) {
      for (const unique of marks.keys())
        if (!published.has(unique) && !this.staged.has(unique)) marks.delete(unique);
    }
  }

  /** NodeUnstage volumes no pod on this node has mounted or still wants. */
  private async unstageUnused(wanted: ReadonlySet<string>): Promise<void> {
    for (const unique of volumesToUnstage(this.state(), wanted)) {
      const staged = this.staged.get(unique)!;
      const unstaged = await this.tearDownCall(
        `unstage:${unique}`,
        () =>
          this.csi!.nodeUnstageVolume({
            volumeId: staged.volume.volumeHandle,
            stagingTargetPath: staged.path,
          }),
        (err) => this.loop.log.warn({ err, volume: unique }, "NodeUnstageVolume failed"),
      );
      if (!unstaged) continue;
      this.staged.delete(unique);
      this.step({ step: "unstaged", node: this.nodeName, volume: unique, path: staged.path });
    }
  }

  /** Patches volumesInUse when it changes; answers what the node status holds now. */
  private async reportVolumesInUse(node: Node, desired: readonly CsiVolumeToMount[]): Promise<string[]> {
    const list = volumesInUse(desired, this.state());
    // Our copy of the node may be a patch behind; writing the same list again changes nothing.
    const current = node.status?.volumesInUse ?? [];
    if (list.length === current.length && list.every((n, i) => n === current[i])) return list;
    try {
      await this.loop.json.patch(
        nodes,
        this.nodeName,
        undefined,
        { status: { volumesInUse: list.length > 0 ? list : null } },
        "merge",
        { subresource: "status" },
      );
      this.step({ step: "volumes-in-use", node: this.nodeName, volumes: list });
      return list;
    } catch (err) {
      this.loop.log.warn({ err }, "patching volumesInUse failed");
      return node.status?.volumesInUse ?? [];
    }
  }

  /** A pod being deleted goes for good once its volumes are torn down and out of volumesInUse. */
  private async finishDeletions(
    here: readonly Pod[],
    wanted: ReadonlySet<string>,
    inUse: readonly string[],
  ): Promise<void> {
    for (const pod of here) {
      if (!pod.metadata.deletionTimestamp) continue;
      const uid = pod.metadata.uid ?? "";
      if (!podMayGo(uid, this.state(), this.podVolumes.get(uid) ?? new Set(), wanted, inUse)) continue;
      try {
        await this.loop.json.delete(pods, pod.metadata.name, pod.metadata.namespace, {
          preconditions: { uid },
          gracePeriodSeconds: 0,
        });
        this.podVolumes.delete(uid);
        this.podIps.delete(uid);
        for (const k of this.waitingForAttach) if (k.startsWith(`${uid} `)) this.waitingForAttach.delete(k);
        this.step({ step: "pod-deleted", node: this.nodeName, pod: podKey(pod) });
      } catch (err) {
        if (!isNotFound(err) && !isConflict(err))
          this.loop.log.warn({ err, pod: podKey(pod) }, "deleting a pod failed");
      }
    }
  }

  /** One volume of one pod: attach check, stage, publish. True once it is mounted. */
  private async mount(
    pod: Pod,
    volume: CsiVolumeToMount,
    node: Node,
    inUse: readonly string[],
  ): Promise<boolean> {
    const uid = pod.metadata.uid ?? "";
    const unique = volume.uniqueName;
    const existing = this.mounted.get(uid)?.get(unique);
    if (existing?.ready) return true;
    const key = `mount:${uid}:${unique}`;
    if (this.inBackoff(key)) return false;
    // Published, but its expansion failed: as upstream's uncertain mount, the pod waits and the expansion is retried.
    if (existing && !existing.uncertain) return this.finishMount(pod, existing, key);

    let publishContext: Record<string, string> = {};
    if (volume.attachRequired) {
      // As VerifyControllerAttachedVolume: reported in use first, then listed as attached.
      if (!inUse.includes(unique)) return false;
      if (!node.status?.volumesAttached?.some((a) => a.name === unique)) {
        const waitKey = `${uid} ${unique}`;
        if (!this.waitingForAttach.has(waitKey)) {
          this.waitingForAttach.add(waitKey);
          this.step({ step: "waiting-for-attach", node: this.nodeName, pod: podKey(pod), volume: unique });
        }
        return false;
      }
      const vaName = volumeAttachmentName(volume.volumeHandle, volume.driver, this.nodeName);
      let va: VolumeAttachment;
      try {
        va = await this.loop.json.get<VolumeAttachment>(volumeAttachments, vaName);
      } catch (err) {
        if (!isNotFound(err)) this.loop.log.warn({ err, vaName }, "reading the VolumeAttachment failed");
        this.failed(key);
        return false;
      }
      if (va.status?.attached !== true) return false;
      publishContext = { ...va.status.attachmentMetadata };
    }

    const root = this.options.rootDir;
    const staging = stagingPath(root, volume.driver, volume.volumeHandle, volume.pvName, volume.block);
    this.podVolumes.set(uid, (this.podVolumes.get(uid) ?? new Set()).add(unique));
    // What NodeStage and NodePublish both say about the volume.
    const request = {
      volumeId: volume.volumeHandle,
      publishContext,
      volumeCapability: volume.capability,
      volumeContext: volume.volumeContext,
    };
    if (this.stages && (this.staged.get(unique)?.uncertain ?? true)) {
      const warnStage = this.volumeWarning(pod, "FailedMount", "MountVolume.MountDevice", volume.pvName);
      const stagedNow = await this.attempt(
        key,
        () => this.csi!.nodeStageVolume({ ...request, stagingTargetPath: staging }),
        async (err) => {
          // As upstream's markDeviceErrorState: after a final error an uncertain stage is forgotten, not unstaged.
          if (!isFinalCsiError(err)) this.staged.set(unique, { path: staging, volume, uncertain: true });
          else this.staged.delete(unique);
          await warnStage(err);
        },
      );
      if (!stagedNow) return false;
      this.staged.set(unique, { path: staging, volume });
      this.step({ step: "staged", node: this.nodeName, volume: unique, path: staging });
    }
    const target = targetPath(root, uid, volume.pvName, volume.block);
    const warn = this.volumeWarning(pod, "FailedMount", "MountVolume.SetUp", volume.pvName);
    const published = await this.attempt(
      key,
      () =>
        this.csi!.nodePublishVolume({
          ...request,
          ...(this.stages ? { stagingTargetPath: staging } : {}),
          targetPath: target,
          readonly: volume.readonly,
        }),
      async (err) => {
        const mounts = this.mounted.get(uid) ?? new Map<string, Mount>();
        // As for a stage (upstream's markVolumeErrorState): after a final error an uncertain publish is forgotten.
        if (!isFinalCsiError(err)) {
          mounts.set(unique, { volume, targetPath: target, ready: false, uncertain: true });
          this.mounted.set(uid, mounts);
        } else if (mounts.get(unique)?.uncertain) {
          mounts.delete(unique);
          if (mounts.size === 0) this.mounted.delete(uid);
        }
        await warn(err);
      },
    );
    if (!published) return false;
    this.waitingForAttach.delete(`${uid} ${unique}`);
    const mounts = this.mounted.get(uid) ?? new Map<string, Mount>();
    const mount: Mount = { volume, targetPath: target, ready: false };
    mounts.set(unique, mount);
    this.mounted.set(uid, mounts);
    this.step({ step: "published", node: this.nodeName, pod: podKey(pod), volume: unique, path: target });
    return this.finishMount(pod, mount, key);
  }

  /** Mount-time expansion of a published volume; the volume is ready once it is done or not needed. */
  private async finishMount(pod: Pod, mount: Mount, key: string): Promise<boolean> {
    const unique = mount.volume.uniqueName;
    // An online expansion of the same volume for another pod is under way: this mount waits for it.
    if (this.expanding.has(unique)) return false;
    const outcome = await this.expand(pod, mount, "mount");
    if (!outcome.done) {
      this.failed(key);
      await this.events.event(
        pod,
        "Warning",
        "FailedMount",
        mountExpansionFailedMessage(mount.volume.pvName, outcome.error),
      );
      return false;
    }
    this.succeeded(key);
    mount.ready = true;
    if (!this.recordedSizes.has(unique)) {
      const size = this.claimOf(this.pvOf(mount))?.status?.capacity?.storage;
      if (size !== undefined) this.recordedSizes.set(unique, size);
    }
    return true;
  }

  private pvOf(mount: Mount): PersistentVolume | undefined {
    return this.loop.cache.get<PersistentVolume>(persistentVolumes, mount.volume.pvName);
  }

  /** The watch copy of the claim a PV is bound to (bound back by uid). */
  private claimOf(pv: PersistentVolume | undefined): PersistentVolumeClaim | undefined {
    const ref = pv?.spec.claimRef;
    if (!ref?.name) return undefined;
    const claim = this.loop.cache.get<PersistentVolumeClaim>(
      persistentVolumeClaims,
      ref.name,
      ref.namespace ?? "default",
    );
    return claim && (!ref.uid || claim.metadata.uid === ref.uid) ? claim : undefined;
  }

  private expansionPlan(
    phase: "mount" | "online",
    pv: PersistentVolume,
    claim: PersistentVolumeClaim,
    mount: Mount,
  ): ExpansionPlan {
    const unique = mount.volume.uniqueName;
    const view: ExpansionView = {
      nodeExpands: this.expands,
      readonly: mount.volume.readonly,
      pvCapacity: pv.spec.capacity?.storage,
      claim,
      hadFinalError: this.expandFinalErrors.has(unique),
    };
    return phase === "mount"
      ? mountTimeExpansion(view)
      : onlineExpansion({
          ...view,
          recordedSize: this.recordedSizes.get(unique),
          inUseError: this.expandInUseErrors.has(unique),
        });
  }

  /**
   * The node half of an expansion for a published volume, as upstream's
   * NodeExpander: decided on the watch copy, then again on a live read of the
   * claim; NodeResizeInProgress (conditional), NodeExpandVolume, then the
   * claim's new size (conditional). Every step is safe to redo, so a kubelet
   * stopped between two of them finishes on its next try.
   */
  private async expand(pod: Pod, mount: Mount, phase: "mount" | "online"): Promise<ExpansionOutcome> {
    const done: ExpansionOutcome = { done: true };
    if (!this.expands) return done;
    const volume = mount.volume;
    const unique = volume.uniqueName;
    const pv = this.pvOf(mount);
    const cached = this.claimOf(pv);
    if (!pv || !cached || this.expansionPlan(phase, pv, cached, mount).kind === "none") return done;
    let claim: PersistentVolumeClaim;
    try {
      claim = await this.loop.json.get<PersistentVolumeClaim>(
        persistentVolumeClaims,
        cached.metadata.name,
        cached.metadata.namespace,
      );
    } catch (err) {
      return { done: false, error: `mountVolume.NodeExpandVolume get PVC failed : ${messageOf(err)}` };
    }
    const plan = this.expansionPlan(phase, pv, claim, mount);
    if (plan.kind === "none") return done;
    if (plan.kind === "read-only") {
      const message = readOnlyMessage(volume.pvName);
      await this.events.event(pod, "Warning", "FileSystemResizeFailed", message);
      await this.events.event(claim, "Warning", "FileSystemResizeFailed", message);
      // Counted as done, as upstream does, so it is not tried (and warned) again.
      this.recordedSizes.set(unique, plan.newSize);
      return done;
    }
    const claimPatch = (patch: Record<string, unknown>) =>
      this.loop.json.patch<PersistentVolumeClaim>(
        persistentVolumeClaims,
        claim.metadata.name,
        claim.metadata.namespace,
        patch,
        "strategic",
        { subresource: "status" },
      );
    if (plan.markInProgress) {
      try {
        claim = await claimPatch(inProgressPatch(claim));
      } catch (err) {
        return {
          done: false,
          error: `MountVolume.NodeExpandVolume failed to mark node expansion in progress: ${messageOf(err)}`,
        };
      }
    }
    let secrets: Record<string, string> | undefined;
    const secretRef = pv.spec.csi?.nodeExpandSecretRef;
    if (secretRef?.name) {
      const read = await readSecretData(this.loop.json, {
        name: secretRef.name,
        namespace: secretRef.namespace ?? "default",
      });
      if (!read.ok)
        return { done: false, error: `Expander.NodeExpand failed to get NodeExpandSecretRef: ${read.error}` };
      secrets = read.value;
    }
    try {
      await this.csi!.nodeExpandVolume({
        volumeId: volume.volumeHandle,
        volumePath: mount.targetPath,
        ...(this.stages
          ? {
              stagingTargetPath: stagingPath(
                this.options.rootDir,
                volume.driver,
                volume.volumeHandle,
                volume.pvName,
                volume.block,
              ),
            }
          : {}),
        capacityRange: { requiredBytes: parseQuantityBytes(plan.newSize) },
        volumeCapability: volume.capability,
        ...(secrets ? { secrets } : {}),
      });
    } catch (err) {
      const code = grpcCodeOf(err);
      const failure = expansionFailure(
        plan,
        claim,
        code === undefined ? undefined : grpcCodeName(code),
        messageOf(err),
        rfc3339(new Date()),
      );
      if (failure.final) this.expandFinalErrors.add(unique);
      if (failure.patch) {
        try {
          await claimPatch(failure.patch);
        } catch (patchErr) {
          this.loop.log.warn({ err: patchErr, volume: unique }, "recording a node expansion failure failed");
        }
      }
      if (failure.inUse) {
        this.expandInUseErrors.add(unique);
        // The driver expands this volume only while unused: the mount goes on without it.
        if (phase === "mount") return done;
      }
      return { done: false, error: failure.error };
    }
    const message = expandedMessage(volume.pvName, this.nodeName);
    await this.events.event(pod, "Normal", "FileSystemResizeSuccessful", message);
    await this.events.event(claim, "Normal", "FileSystemResizeSuccessful", message);
    if (plan.recordOnClaim) {
      try {
        await claimPatch(finishedPatch(claim, plan.newSize));
      } catch (err) {
        // Not recorded: the next try expands again (NodeExpandVolume is idempotent) and writes again.
        return {
          done: false,
          error: `mountVolume.NodeExpandVolume update pvc status failed: ${messageOf(err)}`,
        };
      }
    }
    this.expandFinalErrors.delete(unique);
    this.recordedSizes.set(unique, plan.newSize);
    this.step({
      step: "expanded",
      node: this.nodeName,
      pod: podKey(pod),
      volume: unique,
      size: plan.newSize,
      online: phase === "online",
    });
    return done;
  }

  /**
   * Online expansion, as the reconciler's resize check: each ready volume of
   * a running pod whose PV grew past its recorded size is expanded in the
   * background, one at a time per volume, so no other pod waits for it.
   */
  private startOnlineExpansions(byUid: ReadonlyMap<string, Pod>): void {
    if (!this.expands || this.stopping) return;
    for (const [uid, mounts] of this.mounted) {
      const pod = byUid.get(uid);
      if (!pod || pod.metadata.deletionTimestamp || isFinished(pod)) continue;
      for (const mount of mounts.values()) {
        const unique = mount.volume.uniqueName;
        if (!mount.ready || this.expanding.has(unique)) continue;
        const key = `expand:${unique}`;
        if (this.inBackoff(key)) continue;
        const pv = this.pvOf(mount);
        const claim = this.claimOf(pv);
        if (!pv || !claim || this.expansionPlan("online", pv, claim, mount).kind === "none") continue;
        const run = this.expandOnline(pod, mount, key).finally(() => this.expanding.delete(unique));
        this.expanding.set(unique, run);
      }
    }
  }

  private async expandOnline(pod: Pod, mount: Mount, key: string): Promise<void> {
    try {
      const outcome = await this.expand(pod, mount, "online");
      if (outcome.done) {
        this.succeeded(key);
        return;
      }
      this.failed(key);
      await this.events.event(
        pod,
        "Warning",
        "VolumeResizeFailed",
        onlineExpansionFailedMessage(mount.volume.pvName, outcome.error),
      );
    } catch (err) {
      this.failed(key);
      this.loop.log.warn({ err, volume: mount.volume.uniqueName }, "online expansion failed");
    }
  }

  /** Pending/ContainerCreating until every volume is mounted, then Running and Ready; written on change only. */
  private async writeStatus(pod: Pod, node: Node, ready: boolean): Promise<void> {
    const uid = pod.metadata.uid ?? "";
    const hostIP =
      (node.status?.addresses as { type: string; address: string }[] | undefined)?.find(
        (a) => a.type === "InternalIP",
      )?.address ?? "127.0.0.1";
    let podIP = this.podIps.get(uid);
    if (!podIP) {
      podIP = `${this.options.podIpPrefix ?? "10.244.0"}.${this.nextIp++}`;
      this.podIps.set(uid, podIP);
    }
    const place = { hostIP, podIP, now: rfc3339(new Date()) };
    const status = podStatus(pod, place, ready);
    if (statusShape(status) === statusShape(pod.status)) return;
    try {
      await this.loop.json.replace(pods, { ...pod, status }, { subresource: "status" });
      if (ready) this.step({ step: "pod-running", node: this.nodeName, pod: podKey(pod) });
    } catch (err) {
      // A newer pod than our copy: the watch brings it, and the next pass writes again.
      if (!isConflict(err) && !isNotFound(err))
        this.loop.log.warn({ err, pod: podKey(pod) }, "writing pod status failed");
    }
  }
}

/** The kubelet's root directory for a node under the sandbox directory. */
export function kubeletRootDir(sandboxDir: string, node: string): string {
  return join(sandboxDir, "kubelet", node);
}
