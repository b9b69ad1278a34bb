// Is an existing serving certificate still good for this Service? Used by
// `npm run certs` to decide between "leave it alone" and "make a new one", so
// every reason to replace a certificate is here, and each comes with words an
// operator understands.

import { createPrivateKey, X509Certificate } from "node:crypto";
import { needsRenewal } from "./certificates.ts";
import { goParseError } from "./go-x509.ts";

export interface ExistingCertificates {
  cert?: string;
  key?: string;
  caCert?: string;
}

export interface CheckOptions {
  /** DNS names and IPs the certificate must cover. */
  dnsNames: readonly string[];
  ips: readonly string[];
  /** Renew when it expires within this many days. */
  renewBeforeDays: number;
  now?: Date;
}

/** Why the certificate must be replaced, or undefined when it is fine. */
export function renewalReason(existing: ExistingCertificates, options: CheckOptions): string | undefined {
  if (!existing.cert || !existing.key) return "no certificate yet";
  if (!existing.caCert) return "the CA certificate is missing";
  let leaf: X509Certificate;
  let ca: X509Certificate;
  try {
    leaf = new X509Certificate(existing.cert);
    ca = new X509Certificate(existing.caCert);
  } catch (err) {
    return `the certificate cannot be parsed (${(err as Error).message})`;
  }
  // OpenSSL reads more than Go does; kube-apiserver (Go) fails every call on these.
  for (const [what, pem] of [
    ["the certificate", existing.cert],
    ["the CA certificate", existing.caCert],
  ] as const) {
    const refused = goParseError(pem);
    if (refused !== undefined) return `${what} would be refused by kube-apiserver's x509 parser (${refused})`;
  }
  const renewal = { before: options.renewBeforeDays, ...(options.now ? { now: options.now } : {}) };
  if (needsRenewal(existing.cert, renewal))
    return `it expires ${leaf.validToDate.toISOString()}, within ${options.renewBeforeDays} days`;
  try {
    if (!leaf.checkPrivateKey(createPrivateKey(existing.key)))
      return "the key does not belong to the certificate";
  } catch (err) {
    return `the key cannot be parsed (${(err as Error).message})`;
  }
  if (!leaf.checkIssued(ca) || !leaf.verify(ca.publicKey)) return "the certificate is not signed by the CA";
  if (needsRenewal(existing.caCert, renewal))
    return `the CA expires ${ca.validToDate.toISOString()}, within ${options.renewBeforeDays} days`;
  // checkHost/checkIP look at the SANs only (subject: "never"), as TLS clients do.
  const missing = [
    ...options.dnsNames.filter(
      (name) => leaf.checkHost(name, { subject: "never", wildcards: false }) === undefined,
    ),
    ...options.ips.filter((ip) => leaf.checkIP(ip) === undefined),
  ];
  if (missing.length > 0) return `it does not cover ${missing.join(", ")}`;
  return undefined;
}
