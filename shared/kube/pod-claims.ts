// The claims a pod's volumes name, by the rule every storage controller and
// the kubelet share: a persistentVolumeClaim volume names its claimName, a
// generic ephemeral volume the claim `<pod>-<volume>` made for it.
import { isRecord } from "../is-record.ts";
import type { Pod, PodVolume } from "./types.ts";

/** The claim a generic ephemeral volume of the pod gets: `<pod name>-<volume name>`. */
export function ephemeralClaimName(pod: Pod, volume: PodVolume): string {
  return `${pod.metadata.name}-${volume.name}`;
}

/** Every claim name the pod's volumes refer to (in the pod's namespace), once each, in volume order. */
export function podClaimNames(pod: Pod): string[] {
  const volumes = pod.spec?.volumes;
  const names = new Set<string>();
  for (const volume of Array.isArray(volumes) ? volumes : []) {
    if (!isRecord(volume)) continue;
    const claimName = volume.persistentVolumeClaim?.claimName;
    if (typeof claimName === "string" && claimName !== "") names.add(claimName);
    else if (isRecord(volume.ephemeral)) names.add(ephemeralClaimName(pod, volume));
  }
  return [...names];
}
