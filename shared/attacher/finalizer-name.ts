// The attacher's finalizer name, as upstream derives it from the driver name
// (SanitizeDriverName / GetFinalizerName): a finalizer is a qualified name, so
// characters outside [a-zA-Z0-9-] become '-' and a trailing '-' gets an 'X'.
import { finalizerPrefix } from "./constants.ts";

export function sanitizeDriverName(driver: string): string {
  const name = driver.replace(/[^a-zA-Z0-9-]/g, "-");
  // Upstream indexes the last byte and would panic on ""; an empty name gets the 'X' here.
  return name === "" || name.endsWith("-") ? `${name}X` : name;
}

/** "external-attacher/<sanitized driver>", on both VolumeAttachments and PVs. */
export function attacherFinalizer(driver: string): string {
  return `${finalizerPrefix}${sanitizeDriverName(driver)}`;
}
