// Reading X.509 certificates with node:crypto alone: what serving needs
// (expiry of a loaded pair) without node-forge, which only making
// certificates needs (./certificates.ts). Keeping this apart keeps forge
// (~0.6 MB) out of every function's startup.
import { X509Certificate } from "node:crypto";

const DAY_MS = 24 * 60 * 60_000;

/** The first certificate of a PEM (a chain's leaf); throws on anything else. */
export function parseCertificate(pem: string | Buffer): X509Certificate {
  return new X509Certificate(pem);
}

/** When the (first) certificate in `pem` stops being valid. */
export function certificateExpiry(pem: string | Buffer): Date {
  return parseCertificate(pem).validToDate;
}

export interface RenewalOptions {
  /** Renew this many days before expiry. */
  before: number;
  now?: Date;
}

/**
 * True when the certificate expires within `before` days, is not valid yet,
 * or cannot be parsed at all: every case in which a fresh one should be made.
 */
export function needsRenewal(pem: string | Buffer, options: RenewalOptions): boolean {
  const now = (options.now ?? new Date()).getTime();
  let x509: X509Certificate;
  try {
    x509 = parseCertificate(pem);
  } catch {
    return true;
  }
  if (x509.validFromDate.getTime() > now) return true;
  return x509.validToDate.getTime() - now <= options.before * DAY_MS;
}

/** Every certificate in a PEM bundle (a caBundle may hold several CAs during a rotation). */
export function splitPemBundle(pem: string): string[] {
  return (
    pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g)?.map((b) => `${b}\n`) ?? []
  );
}
