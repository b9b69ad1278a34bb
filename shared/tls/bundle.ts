// The caBundle of a webhook configuration during a CA rotation.
//
// The bundle and the served certificate change in two writes (the webhook
// configuration, then the Secret the pods reload from), and pods pick up the
// new certificate some seconds later. A bundle with only the new CA would make
// kube-apiserver reject the old certificate in that window and, with
// failurePolicy Fail, block every matching write. So a rotation publishes the
// new CA next to the previous one, and the previous one leaves at a later
// rotation, or when it expires.

import { X509Certificate } from "node:crypto";
import { splitPemBundle } from "./certificates.ts";

function fingerprint(pem: string): string | undefined {
  try {
    return new X509Certificate(pem).fingerprint256;
  } catch {
    return undefined;
  }
}

function expired(pem: string, now: Date): boolean {
  try {
    return new X509Certificate(pem).validToDate.getTime() <= now.getTime();
  } catch {
    return true;
  }
}

/** Whether `bundle` (PEM) holds the certificate `ca`. */
export function bundleContains(bundle: string, ca: string): boolean {
  const want = fingerprint(ca);
  return want !== undefined && splitPemBundle(bundle).some((pem) => fingerprint(pem) === want);
}

/**
 * The PEM bundle to publish: `current` first, then those of `previous` that
 * are still valid and different from it. Unparsable entries are dropped.
 */
export function rotatedBundle(current: string, previous: readonly string[], now: Date = new Date()): string {
  const out: string[] = [];
  const seen = new Set<string>();
  for (const pem of [...splitPemBundle(current), ...previous.flatMap((p) => splitPemBundle(p))]) {
    const id = fingerprint(pem);
    if (id === undefined || seen.has(id) || expired(pem, now)) continue;
    seen.add(id);
    out.push(pem);
  }
  return out.join("");
}
