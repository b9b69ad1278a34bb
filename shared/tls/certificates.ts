// A private CA and a serving certificate for a webhook or function behind a
// Kubernetes Service, built with node-forge.
//
// kube-apiserver verifies a webhook reached through `clientConfig.service`
// against `<service>.<namespace>.svc` and the `caBundle` of the webhook
// configuration, so the serving certificate names every spelling of the
// Service (short, namespaced, .svc, .svc.cluster.local) and the CA goes into
// the caBundle. Keys come from Node's native RSA generator: node-forge's pure
// JavaScript one takes seconds for 2048 bits; forge then builds and signs the
// X.509 structures, which Node's crypto cannot do.

import { generateKeyPairSync, randomBytes } from "node:crypto";
import { isIP } from "node:net";
import forge from "node-forge";

export interface CertificateRequest {
  /** The Service name, e.g. "kube-storage-functions-admission". */
  service: string;
  namespace: string;
  /** More SANs: DNS names, or IP addresses (v4/v6) which become IP SANs (e.g. "localhost", "127.0.0.1"). */
  extraDnsNames?: readonly string[];
  /** Lifetime of the serving certificate and its CA. Default 365. */
  validDays?: number;
  /** Defaults to now; tests move it. */
  now?: Date;
}

/** All PEM. `caKey` signs new serving certificates; it does not belong in the cluster. */
export interface GeneratedCertificates {
  caCert: string;
  caKey: string;
  cert: string;
  key: string;
}

export const DEFAULT_VALID_DAYS = 365;
const RSA_BITS = 2048;
// Certificates are valid from a few minutes back, so a client whose clock
// lags slightly behind ours does not reject a certificate made a second ago.
const BACKDATE_MS = 5 * 60_000;
const DAY_MS = 24 * 60 * 60_000;
const DNS_NAME = /^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** The names kube-apiserver and in-cluster clients may use for a Service. */
export function serviceDnsNames(service: string, namespace: string): string[] {
  return [
    service,
    `${service}.${namespace}`,
    `${service}.${namespace}.svc`,
    `${service}.${namespace}.svc.cluster.local`,
  ];
}

/** DNS and IP SANs of a request, deduplicated, in a stable order. */
export function subjectAltNames(request: CertificateRequest): { dns: string[]; ips: string[] } {
  const dns: string[] = [];
  const ips: string[] = [];
  for (const name of [
    ...serviceDnsNames(request.service, request.namespace),
    ...(request.extraDnsNames ?? []),
  ]) {
    const value = name.trim();
    if (value === "") continue;
    if (isIP(value) !== 0) {
      if (!ips.includes(value)) ips.push(value);
    } else {
      const lower = value.toLowerCase();
      if (!DNS_NAME.test(lower) || lower.length > 253)
        throw new TypeError(`not a DNS name or IP address: ${JSON.stringify(name)}`);
      if (!dns.includes(lower)) dns.push(lower);
    }
  }
  return { dns, ips };
}

function checkRequest(request: CertificateRequest): number {
  for (const [field, value] of [
    ["service", request.service],
    ["namespace", request.namespace],
  ] as const) {
    if (typeof value !== "string" || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(value) || value.length > 63)
      throw new TypeError(`${field} must be a DNS-1123 label, got ${JSON.stringify(value)}`);
  }
  const days = request.validDays ?? DEFAULT_VALID_DAYS;
  if (!Number.isInteger(days) || days < 1 || days > 36_500)
    throw new TypeError(`validDays must be an integer from 1 to 36500, got ${days}`);
  return days;
}

function newKeyPair(): {
  forgeKey: forge.pki.rsa.PrivateKey;
  publicKey: forge.pki.rsa.PublicKey;
  pem: string;
} {
  const { privateKey } = generateKeyPairSync("rsa", {
    modulusLength: RSA_BITS,
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
    publicKeyEncoding: { type: "spki", format: "pem" },
  });
  const forgeKey = forge.pki.privateKeyFromPem(privateKey) as forge.pki.rsa.PrivateKey;
  const publicKey = forge.pki.rsa.setPublicKey(forgeKey.n, forgeKey.e);
  return { forgeKey, publicKey, pem: privateKey };
}

/**
 * A commonName attribute encoded as UTF8String, as Go's own certificate
 * generator and RFC 5280 do. node-forge defaults to PrintableString, which may
 * not hold '@' (our CA's name has one): Go refuses such a certificate outright.
 */
function commonName(value: string): forge.pki.CertificateField {
  // The typings call the tag a Class; node-forge reads it as the universal type.
  return { name: "commonName", value, valueTagClass: forge.asn1.Type.UTF8 as unknown as forge.asn1.Class };
}

/** 16 random bytes, top bit clear: a positive DER INTEGER, as RFC 5280 requires. */
function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] ?? 0) & 0x7f || 0x01;
  return bytes.toString("hex");
}

function validity(cert: forge.pki.Certificate, now: Date, days: number): void {
  cert.validity.notBefore = new Date(now.getTime() - BACKDATE_MS);
  cert.validity.notAfter = new Date(now.getTime() + days * DAY_MS);
}

export function generateCertificates(request: CertificateRequest): GeneratedCertificates {
  const days = checkRequest(request);
  const now = request.now ?? new Date();
  const sans = subjectAltNames(request);

  const ca = newKeyPair();
  const caCert = forge.pki.createCertificate();
  caCert.publicKey = ca.publicKey;
  caCert.serialNumber = serialNumber();
  validity(caCert, now, days);
  // The timestamp tells CAs of successive renewals apart in a caBundle.
  const caSubject = [commonName(`${request.service}-ca@${Math.floor(now.getTime() / 1000)}`)];
  caCert.setSubject(caSubject);
  caCert.setIssuer(caSubject);
  caCert.setExtensions([
    { name: "basicConstraints", cA: true, pathLenConstraint: 0, critical: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: "subjectKeyIdentifier" },
  ]);
  caCert.sign(ca.forgeKey, forge.md.sha256.create());

  const leaf = newKeyPair();
  const cert = forge.pki.createCertificate();
  cert.publicKey = leaf.publicKey;
  cert.serialNumber = serialNumber();
  validity(cert, now, days);
  cert.setSubject([commonName(`${request.service}.${request.namespace}.svc`)]);
  cert.setIssuer(caSubject);
  cert.setExtensions([
    { name: "basicConstraints", cA: false, critical: true },
    { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
    { name: "extKeyUsage", serverAuth: true },
    {
      name: "subjectAltName",
      altNames: [
        ...sans.dns.map((value) => ({ type: 2, value })),
        ...sans.ips.map((ip) => ({ type: 7, ip })),
      ],
    },
    { name: "subjectKeyIdentifier" },
    { name: "authorityKeyIdentifier", keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  cert.sign(ca.forgeKey, forge.md.sha256.create());

  return {
    caCert: forge.pki.certificateToPem(caCert),
    caKey: ca.pem,
    cert: forge.pki.certificateToPem(cert),
    key: leaf.pem,
  };
}

// Reading certificates needs only node:crypto; it lives in ./x509.ts so the
// serving path (./serving.ts) does not load node-forge. Re-exported here.
export {
  certificateExpiry,
  needsRenewal,
  parseCertificate,
  type RenewalOptions,
  splitPemBundle,
} from "./x509.ts";
