// Progress Events ("waiting for the external provisioner", "provisioning
// volume for claim") say what a claim is waiting for. Upstream sends them on
// every sync, which for a claim provisioned within seconds is two or three
// Event writes nobody reads, per claim. We send them once the claim has
// waited long enough for a person to look: a claim stuck past the threshold
// shows exactly upstream's Events; a fast one shows only the outcome
// (ProvisioningSucceeded or a failure). /explain answers the same question
// at any time.

/** Seconds a claim may wait before progress Events are worth their writes. */
export const progressEventDelaySeconds = 10;

/** True when the object is old enough (or its age unknown) for progress Events. */
export function progressEventsDue(
  creationTimestamp: string | undefined,
  now: Date,
  delaySeconds = progressEventDelaySeconds,
): boolean {
  if (!creationTimestamp) return true;
  const created = Date.parse(creationTimestamp);
  if (Number.isNaN(created)) return true;
  return now.getTime() - created >= delaySeconds * 1000;
}
