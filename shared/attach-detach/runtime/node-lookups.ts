// Which nodes a claim or a PV concerns, read from the API: for routing
// events to nodes, following up a released lock, and the Multi-Attach
// message's pods elsewhere.
import { getOptional } from "../../kube/api-errors.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { podClaimNames } from "../../kube/pod-claims.ts";
import { isPodTerminated } from "../../kube/pod-terminated.ts";
import { persistentVolumes, pods, volumeAttachments } from "../../kube/resources.ts";
import type { PersistentVolume, Pod, VolumeAttachment } from "../../kube/types.ts";
import { annAttachLock } from "../../kube/well-known.ts";

export async function nodesUsingClaim(
  kube: KubeJsonClient,
  namespace: string,
  claimName: string,
): Promise<string[]> {
  const list = await kube.list<Pod>(pods, { namespace });
  return list.items
    .filter((p) => p.spec.nodeName && podClaimNames(p).includes(claimName))
    .map((p) => p.spec.nodeName as string);
}

/** Nodes with a VolumeAttachment for the PV, holding its lock, or running pods that use its claim. */
export async function nodesForVolume(kube: KubeJsonClient, pvName: string): Promise<string[]> {
  const [pv, attachments] = await Promise.all([
    getOptional(() => kube.get<PersistentVolume>(persistentVolumes, pvName)),
    kube.list<VolumeAttachment>(volumeAttachments),
  ]);
  const out = new Set<string>();
  for (const va of attachments.items)
    if (va.spec.source.persistentVolumeName === pvName) out.add(va.spec.nodeName);
  const lock = pv?.metadata.annotations?.[annAttachLock];
  if (lock) out.add(lock);
  const ref = pv?.spec.claimRef;
  if (ref?.name && ref.namespace)
    for (const n of await nodesUsingClaim(kube, ref.namespace, ref.name)) out.add(n);
  return [...out];
}

/** Running pods on other nodes that use the PV's claim. */
export async function podsElsewhere(
  kube: KubeJsonClient,
  pv: PersistentVolume,
  nodeName: string,
): Promise<Pod[]> {
  const ref = pv.spec.claimRef;
  const all = await kube.list<Pod>(pods);
  return all.items.filter(
    (p) =>
      p.spec.nodeName &&
      p.spec.nodeName !== nodeName &&
      !isPodTerminated(p) &&
      p.metadata.namespace === ref?.namespace &&
      podClaimNames(p).includes(ref?.name ?? ""),
  );
}
