// Reads what one attach or detach needs besides the VolumeAttachment: its PV,
// the CSINode of its node, and the controller-publish Secret. Everything is
// read fresh; a missing object is `undefined` (the decision turns it into
// upstream's error text), any other API failure is thrown.
import type { CsiClient } from "../../csi/client.ts";
import type { ListVolumesEntry } from "../../csi/types.ts";
import { getOptional } from "../../kube/api-errors.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { csiNodes, persistentVolumes } from "../../kube/resources.ts";
import { readSecretData } from "../../kube/secrets.ts";
import type { CSINode, CSIPersistentVolumeSource, PersistentVolume } from "../../kube/types.ts";

export function loadVolume(
  kube: KubeJsonClient,
  name: string | undefined,
): Promise<PersistentVolume | undefined> {
  return name
    ? getOptional(() => kube.get<PersistentVolume>(persistentVolumes, name))
    : Promise.resolve(undefined);
}

export function loadCsiNode(kube: KubeJsonClient, nodeName: string): Promise<CSINode | undefined> {
  return getOptional(() => kube.get<CSINode>(csiNodes, nodeName));
}

/**
 * The controllerPublishSecretRef's data (upstream getCredentialsFromPV);
 * undefined secrets when the source names none, an error when it names a
 * Secret that does not exist.
 */
export async function loadPublishSecrets(
  kube: KubeJsonClient,
  csi: CSIPersistentVolumeSource,
): Promise<{ ok: true; value: Record<string, string> | undefined } | { ok: false; error: string }> {
  const ref = csi.controllerPublishSecretRef;
  if (!ref) return { ok: true, value: undefined };
  const name = ref.name ?? "";
  const namespace = ref.namespace ?? "";
  const data = name && namespace ? await readSecretData(kube, { name, namespace }) : undefined;
  if (!data?.ok)
    return {
      ok: false,
      error: `failed to load secret "${namespace}/${name}": secrets "${name}" not found`,
    };
  return { ok: true, value: data.value };
}

/** Every ListVolumes page (upstream CSIVolumeLister): `maxEntries` 0 lets the driver choose. */
export async function listAllVolumes(csi: CsiClient, maxEntries = 0): Promise<ListVolumesEntry[]> {
  const entries: ListVolumesEntry[] = [];
  let startingToken = "";
  const seen = new Set<string>();
  do {
    const page = await csi.listVolumes({ maxEntries, startingToken });
    entries.push(...page.entries);
    startingToken = page.nextToken;
    // A driver that hands back a token twice would page forever.
    if (startingToken !== "" && seen.has(startingToken))
      throw new Error(`ListVolumes returned the token ${JSON.stringify(startingToken)} twice`);
    seen.add(startingToken);
  } while (startingToken !== "");
  return entries;
}
