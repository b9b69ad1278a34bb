// Reads what one node's reconcile decides on: the node, its pods, their
// claims, every VolumeAttachment and CSIDriver, and the PVs any of them (or
// the event) names.
import { getOptional } from "../../kube/api-errors.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { podClaimNames } from "../../kube/pod-claims.ts";
import {
  csiDrivers,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  volumeAttachments,
} from "../../kube/resources.ts";
import type {
  CSIDriver,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  VolumeAttachment,
} from "../../kube/types.ts";
import type { DetachPolicy } from "../detach-policy.ts";
import type { NodeReconcileInput } from "../reconcile-node.ts";

export async function loadNode(
  kube: KubeJsonClient,
  nodeName: string,
  hintVolumes: readonly string[],
  now: Date,
  policy: DetachPolicy,
): Promise<NodeReconcileInput> {
  // The node first: its status write is conditional on this read, so a write that succeeds was
  // decided on attachments read after every earlier successful write (no stale list wins).
  const node = await getOptional(() => kube.get<Node>(nodes, nodeName));
  const [podList, attachments, drivers] = await Promise.all([
    kube.list<Pod>(pods, { fieldSelector: `spec.nodeName=${nodeName}` }),
    kube.list<VolumeAttachment>(volumeAttachments),
    kube.list<CSIDriver>(csiDrivers),
  ]);
  const claimKeys = new Set<string>();
  for (const p of podList.items)
    for (const c of podClaimNames(p)) claimKeys.add(`${p.metadata.namespace}/${c}`);
  const claims = (
    await Promise.all(
      [...claimKeys].map((k) => {
        const [ns, name] = k.split("/") as [string, string];
        return getOptional(() => kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, ns));
      }),
    )
  ).filter((c): c is PersistentVolumeClaim => c !== undefined);
  const pvNames = new Set<string>(hintVolumes);
  for (const c of claims) if (c.spec.volumeName) pvNames.add(c.spec.volumeName);
  for (const va of attachments.items) {
    if (va.spec.nodeName === nodeName && va.spec.source.persistentVolumeName)
      pvNames.add(va.spec.source.persistentVolumeName);
  }
  const volumes = (
    await Promise.all(
      [...pvNames].map((n) => getOptional(() => kube.get<PersistentVolume>(persistentVolumes, n))),
    )
  ).filter((v): v is PersistentVolume => v !== undefined);
  return {
    nodeName,
    node,
    pods: podList.items,
    claims,
    volumes,
    drivers: drivers.items,
    attachments: attachments.items,
    now,
    policy,
  };
}
