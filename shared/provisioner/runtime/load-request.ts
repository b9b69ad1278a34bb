// Reads what one CreateVolume request needs (the provisioner Secret, the
// selected node and CSINodes for topology, the data source objects) and
// assembles the request with the pure builders. Everything it reads is read
// fresh, except every Node and CSINode when the process keeps watched copies
// of them (NodeTopologyCopies); the request is the same on every retry for
// the same state.
import type { CsiCapabilities } from "../../csi/capabilities.ts";
import type { TopologyRequirement, VolumeContentSource } from "../../csi/types.ts";
import { getOptional } from "../../kube/api-errors.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import {
  csiNodes,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  volumeAttributesClasses,
  volumeSnapshotContents,
  volumeSnapshots,
} from "../../kube/resources.ts";
import { readSecretData } from "../../kube/secrets.ts";
import type {
  CSINode,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
  VolumeAttributesClass,
  VolumeSnapshot,
  VolumeSnapshotContent,
} from "../../kube/types.ts";
import type { WatchedStore } from "../../kube/watched-store.ts";
import { annSelectedNode } from "../../kube/well-known.ts";
import { buildCreateVolumeRequest, planProvisioning, type RequestOutcome } from "../create-volume-request.ts";
import { cloneContentSource, planDataSource, snapshotContentSource } from "../data-source.ts";
import type { ProvisionerOptions } from "../options.ts";
import { accessibilityRequirements } from "../topology.ts";
import {
  type ClassAttributes,
  claimVolumeAttributesClassName,
  classAttributes,
  modifyVolumeCapabilityError,
} from "../volume-attributes-class.ts";
import { nodesAndCsiNodes } from "./topology-copies.ts";

/**
 * Watched copies of every Node and CSINode, the way upstream reads them from
 * its informers. A volume that may go to any node (Immediate binding, or not
 * STRICT_TOPOLOGY) takes its topology from every node, and listing both kinds
 * for each claim grows with the cluster (bench/README.md). A copy lags the
 * API by moments, as an informer does: a node that joins meanwhile counts
 * from the next claim on. The selected node itself is still read fresh.
 */
export interface NodeTopologyCopies {
  nodes: Pick<WatchedStore<Node>, "store" | "synced" | "whenSynced">;
  csiNodes: Pick<WatchedStore<CSINode>, "store" | "synced" | "whenSynced">;
}

async function loadAccessibility(
  kube: KubeJsonClient,
  claim: PersistentVolumeClaim,
  storageClass: StorageClass,
  driverName: string,
  options: ProvisionerOptions,
  copies: NodeTopologyCopies | undefined,
): Promise<
  { ok: true; value: TopologyRequirement | undefined } | { ok: false; error: string; reschedule: boolean }
> {
  const selected = claim.metadata.annotations?.[annSelectedNode];
  const needAll = !selected || !options.strictTopology;
  const [node, csiNode, [allNodes, allCsiNodes]] = await Promise.all([
    selected ? getOptional(() => kube.get<Node>(nodes, selected)) : Promise.resolve(undefined),
    selected ? getOptional(() => kube.get<CSINode>(csiNodes, selected)) : Promise.resolve(undefined),
    needAll ? nodesAndCsiNodes(kube, copies) : Promise.resolve<[Node[], CSINode[]]>([[], []]),
  ]);
  return accessibilityRequirements({
    driverName,
    claimName: claim.metadata.name,
    ...(selected ? { selectedNode: { name: selected, node, csiNode } } : {}),
    nodes: allNodes,
    csiNodes: allCsiNodes,
    allowedTopologies: storageClass.allowedTopologies,
    strictTopology: options.strictTopology,
    immediateTopology: options.immediateTopology,
  });
}

async function loadContentSource(
  kube: KubeJsonClient,
  claim: PersistentVolumeClaim,
  storageClass: StorageClass,
  capabilities: CsiCapabilities,
): Promise<
  | { ok: true; value: VolumeContentSource | undefined }
  | { ok: false; error: string }
  | { populator: true; reason: string; event: { reason: string; message: string } }
> {
  const plan = planDataSource(claim);
  if (!plan.ok) return plan;
  if (plan.type === "none") return { ok: true, value: undefined };
  if (plan.type === "populator") return { populator: true, reason: plan.ignoredReason, event: plan.event };
  const supported =
    plan.requiredCapability.capability === "CLONE_VOLUME"
      ? capabilities.cloneVolume
      : capabilities.createDeleteSnapshot;
  if (!supported) return { ok: false, error: plan.requiredCapability.missingError };
  const ns = claim.metadata.namespace ?? "";
  if (plan.type === "snapshot") {
    const snapshot = await getOptional(() => kube.get<VolumeSnapshot>(volumeSnapshots, plan.ref.name, ns));
    const contentName = snapshot?.status?.boundVolumeSnapshotContentName;
    const content = contentName
      ? await getOptional(() => kube.get<VolumeSnapshotContent>(volumeSnapshotContents, contentName))
      : undefined;
    return snapshotContentSource({ claim, storageClass, ref: plan.ref, snapshot, content });
  }
  const sourceClaim = await getOptional(() =>
    kube.get<PersistentVolumeClaim>(persistentVolumeClaims, plan.ref.name, ns),
  );
  const sourceVolumeName = sourceClaim?.spec.volumeName;
  const sourceVolume = sourceVolumeName
    ? await getOptional(() => kube.get<PersistentVolume>(persistentVolumes, sourceVolumeName))
    : undefined;
  return cloneContentSource({ claim, storageClass, ref: plan.ref, sourceClaim, sourceVolume });
}

export async function loadCreateVolumeRequest(
  kube: KubeJsonClient,
  input: {
    claim: PersistentVolumeClaim;
    storageClass: StorageClass;
    pvName: string;
    driverName: string;
    options: ProvisionerOptions;
    capabilities: CsiCapabilities;
    /** The process's copies of every Node and CSINode, started on first use; none: list them. */
    topology?: (() => NodeTopologyCopies) | undefined;
  },
): Promise<RequestOutcome> {
  const { claim, storageClass, pvName, driverName, options, capabilities } = input;
  const unsupported = modifyVolumeCapabilityError(claim, capabilities.modifyVolume);
  if (unsupported) return { kind: "error", error: unsupported };
  const plan = planProvisioning(claim, storageClass, pvName, options);
  if (!plan.ok) return { kind: "error", error: plan.error };
  const secretRef = plan.value.secretRefs.provisioner;
  const secretData = secretRef ? await readSecretData(kube, secretRef) : undefined;
  if (secretData && !secretData.ok) return { kind: "error", error: secretData.error };

  const content = await loadContentSource(kube, claim, storageClass, capabilities);
  if ("populator" in content) return { kind: "populator", reason: content.reason, event: content.event };
  if (!content.ok) return { kind: "error", error: content.error };

  let accessibility: TopologyRequirement | undefined;
  if (capabilities.accessibilityConstraints) {
    const topo = await loadAccessibility(kube, claim, storageClass, driverName, options, input.topology?.());
    if (!topo.ok)
      return topo.reschedule
        ? { kind: "reschedule", error: topo.error }
        : { kind: "error", error: topo.error };
    accessibility = topo.value;
  }
  // Read last, as upstream does: every other reason to fail is reported first.
  const vacName = claimVolumeAttributesClassName(claim);
  let volumeAttributes: ClassAttributes | undefined;
  if (vacName !== "") {
    const vac = await getOptional(() => kube.get<VolumeAttributesClass>(volumeAttributesClasses, vacName));
    const judged = classAttributes(vacName, vac, driverName);
    if (!judged.ok) return { kind: "error", error: judged.error };
    volumeAttributes = judged.value;
  }
  const request = buildCreateVolumeRequest({
    claim,
    storageClass,
    pvName,
    plan: plan.value,
    options,
    supportsSingleNodeMultiWriter: capabilities.singleNodeMultiWriter,
    secrets: secretData?.value,
    accessibility,
    contentSource: content.value,
    volumeAttributes,
  });
  if (!request.ok) return { kind: "error", error: request.error };
  return {
    kind: "ready",
    request: request.value,
    plan: plan.value,
    selectedNode: claim.metadata.annotations?.[annSelectedNode],
    ...(volumeAttributes ? { volumeAttributesClassName: volumeAttributes.name } : {}),
  };
}
