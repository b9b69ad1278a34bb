// A webhook's certificate judged as kube-apiserver (Go's crypto/tls and
// crypto/x509) judges it, in Go's order and words. OpenSSL, under Node,
// accepts certificates Go refuses: an '@' in a PrintableString, a serving
// certificate named only by its commonName (Go ignores the CN since 1.17).
// A sandbox that took those would hide a webhook that no real cluster can
// call. OpenSSL still checks the handshake; this adds Go's refusals and
// gives every refusal Go's text.
//
// Order, as Go: parse every certificate the server sent; then the leaf's
// validity, the host name (SANs only), the chain to a caBundle root, and
// serverAuth in the chain's extended key usages.

import { X509Certificate } from "node:crypto";
import { isIP } from "node:net";
import { connect } from "node:tls";
import { rfc3339 } from "../../shared/kube/time.ts";
import {
  EKU_ANY,
  EKU_SERVER_AUTH,
  type GoCertificate,
  GoX509Error,
  KEY_USAGE_CERT_SIGN,
  parseGoCertificate,
  pemCertificates,
} from "../../shared/tls/go-x509.ts";

/** A refusal in Go's words; the caller adds `Post "<url>": `. */
export class GoTlsError extends Error {
  override name = "GoTlsError";
}

/** The caBundle as Go's CertPool.AppendCertsFromPEM keeps it: certificates Go cannot parse are dropped. */
export function goRootPool(caBundlePem: string): { pem: string[]; roots: GoCertificate[] } {
  const pem: string[] = [];
  const roots: GoCertificate[] = [];
  for (const der of pemCertificates(caBundlePem)) {
    try {
      roots.push(parseGoCertificate(der));
      pem.push(`-----BEGIN CERTIFICATE-----\n${der.toString("base64")}\n-----END CERTIFICATE-----\n`);
    } catch (err) {
      if (!(err instanceof GoX509Error)) throw err;
    }
  }
  return { pem, roots };
}

/** Go's isValid for one certificate: unhandled critical extensions, then the validity period. */
function validityError(cert: GoCertificate, now: Date): string | undefined {
  if (cert.unhandledCritical.length > 0) return "x509: unhandled critical extension";
  if (now < cert.notBefore)
    return `x509: certificate has expired or is not yet valid: current time ${rfc3339(now)} is before ${rfc3339(cert.notBefore)}`;
  if (now > cert.notAfter)
    return `x509: certificate has expired or is not yet valid: current time ${rfc3339(now)} is after ${rfc3339(cert.notAfter)}`;
  return undefined;
}

/** Go's matchHostnames: label by label, a leading "*" label matches one label. */
function matchHostnames(pattern: string, host: string): boolean {
  const wanted = host.replace(/\.$/, "").toLowerCase();
  if (pattern === "" || wanted === "") return false;
  const p = pattern.toLowerCase().split(".");
  const h = wanted.split(".");
  return p.length === h.length && p.every((label, i) => (i === 0 && label === "*") || label === h[i]);
}

/** Go's VerifyHostname and HostnameError: SANs only; the CN is named only to say it no longer counts. */
function hostnameError(cert: GoCertificate, host: string): string | undefined {
  const candidate = host.replace(/^\[(.*)\]$/, "$1");
  if (isIP(candidate) !== 0) {
    const want = normalizeIp(candidate);
    if (cert.ipAddresses.some((ip) => normalizeIp(ip) === want)) return undefined;
  } else if (cert.dnsNames.some((name) => matchHostnames(name, candidate))) {
    return undefined;
  }
  const shown = isIP(candidate) !== 0 ? candidate : host;
  if (!cert.hasSanExtension && matchHostnames(cert.subjectCommonName, shown))
    return "x509: certificate relies on legacy Common Name field, use SANs instead";
  let valid: string;
  if (isIP(candidate) !== 0) {
    if (cert.ipAddresses.length === 0)
      return `x509: cannot validate certificate for ${candidate} because it doesn't contain any IP SANs`;
    valid = cert.ipAddresses.join(", ");
  } else {
    valid = cert.dnsNames.join(", ");
  }
  if (valid === "") return `x509: certificate is not valid for any names, but wanted to match ${shown}`;
  return `x509: certificate is valid for ${valid}, not ${shown}`;
}

function normalizeIp(ip: string): string {
  return isIP(ip) === 6 ? new URL(`http://[${ip}]/`).hostname : ip;
}

/** Go's CheckSignatureFrom: the parent must be allowed to sign certificates, and must have signed this one. */
function signatureError(child: GoCertificate, parent: GoCertificate): string | undefined {
  if (
    (parent.version === 3 && !parent.basicConstraintsValid) ||
    (parent.basicConstraintsValid && !parent.isCA)
  )
    return "x509: invalid signature: parent certificate cannot sign this kind of certificate";
  if (parent.keyUsage !== 0 && (parent.keyUsage & KEY_USAGE_CERT_SIGN) === 0)
    return "x509: invalid signature: parent certificate cannot sign this kind of certificate";
  try {
    if (new X509Certificate(child.raw).verify(new X509Certificate(parent.raw).publicKey)) return undefined;
  } catch {
    // A key Node cannot use is a signature that cannot be checked: a failed one.
  }
  return "crypto/rsa: verification error";
}

function displayName(cert: GoCertificate): string {
  if (cert.subjectCommonName !== "") return cert.subjectCommonName;
  if (cert.subjectOrganization !== undefined) return cert.subjectOrganization;
  const hex = cert.serial.toString("hex") || "0";
  return `serial:${BigInt(`0x${hex}`).toString()}`;
}

const MAX_DEPTH = 5;

/** Go's buildChains, far enough for webhook certificates: name-matched candidates, signature, validity. */
function buildChain(
  cert: GoCertificate,
  intermediates: readonly GoCertificate[],
  roots: readonly GoCertificate[],
  now: Date,
  depth = 0,
): { chain: GoCertificate[] } | { error: string } {
  if (roots.some((root) => root.raw.equals(cert.raw))) return { chain: [cert] };
  let hint: { error: string; cert: GoCertificate } | undefined;
  const candidates = [
    ...roots.map((c) => ({ c, root: true })),
    ...intermediates.map((c) => ({ c, root: false })),
  ].filter(({ c }) => c.rawSubject.equals(cert.rawIssuer) && !c.raw.equals(cert.raw));
  for (const { c, root } of candidates) {
    const problem = signatureError(cert, c) ?? validityError(c, now);
    if (problem !== undefined) {
      hint ??= { error: problem, cert: c };
      continue;
    }
    if (root) return { chain: [cert, c] };
    if (depth >= MAX_DEPTH) continue;
    const rest = buildChain(c, intermediates, roots, now, depth + 1);
    if ("chain" in rest) return { chain: [cert, ...rest.chain] };
  }
  const unknown = "x509: certificate signed by unknown authority";
  if (hint === undefined) return { error: unknown };
  return {
    error: `${unknown} (possibly because of ${JSON.stringify(hint.error)} while trying to verify candidate authority certificate ${JSON.stringify(displayName(hint.cert))})`,
  };
}

function keyUsageError(chain: readonly GoCertificate[]): string | undefined {
  for (const cert of chain) {
    if (cert.extKeyUsage.length === 0) continue;
    if (!cert.extKeyUsage.includes(EKU_SERVER_AUTH) && !cert.extKeyUsage.includes(EKU_ANY))
      return "x509: certificate specifies an incompatible key usage";
  }
  return undefined;
}

export interface GoVerifyInput {
  /** DER, leaf first, as the server sent them. */
  chain: readonly Buffer[];
  /** The caBundle's roots (goRootPool); undefined: the system roots, which OpenSSL has checked. */
  roots: readonly GoCertificate[] | undefined;
  /** The name the certificate must carry: the URL's host, or `<service>.<namespace>.svc`. */
  host: string;
  now: Date;
}

/** Go's refusal of a server's certificates, with crypto/tls's prefix, or undefined when Go accepts them. */
export function goVerifyServer(input: GoVerifyInput): string | undefined {
  const parsed: GoCertificate[] = [];
  for (const der of input.chain) {
    try {
      parsed.push(parseGoCertificate(der));
    } catch (err) {
      if (!(err instanceof GoX509Error)) throw err;
      return `tls: failed to parse certificate from server: ${err.message}`;
    }
  }
  const leaf = parsed[0];
  if (leaf === undefined) return "tls: server sent no certificate";
  const refused = (why: string) => `tls: failed to verify certificate: ${why}`;
  const invalid = validityError(leaf, input.now) ?? hostnameError(leaf, input.host);
  if (invalid !== undefined) return refused(invalid);
  let chain: GoCertificate[] = parsed;
  if (input.roots !== undefined) {
    const built = buildChain(leaf, parsed.slice(1), input.roots, input.now);
    if ("error" in built) return refused(built.error);
    chain = built.chain;
  }
  const usage = keyUsageError(chain);
  return usage === undefined ? undefined : refused(usage);
}

/** A peer certificate as Node hands it over: checkServerIdentity and getPeerCertificate(true) link the issuers. */
export interface LinkedCertificate {
  raw: Buffer;
  issuerCertificate?: LinkedCertificate;
}

/** The DER chain of a peer certificate, leaf first; the root links to itself. */
export function derChain(cert: LinkedCertificate): Buffer[] {
  const chain: Buffer[] = [];
  let current: LinkedCertificate | undefined = cert;
  while (current?.raw !== undefined && !chain.some((der) => der.equals(current!.raw))) {
    chain.push(current.raw);
    current = current.issuerCertificate;
  }
  return chain;
}

export interface ProbeTarget {
  host: string;
  port: number;
  servername: string | undefined;
  timeoutMs: number;
}

/**
 * The certificates a server presents, without trusting them: a handshake
 * that sends nothing. Used only after OpenSSL refused the server, to say why
 * in Go's words.
 */
export function presentedChain(target: ProbeTarget): Promise<Buffer[] | undefined> {
  return new Promise((resolve) => {
    const socket = connect(
      {
        host: target.host,
        port: target.port,
        rejectUnauthorized: false,
        ...(target.servername !== undefined ? { servername: target.servername } : {}),
      },
      () => {
        const chain = derChain(socket.getPeerCertificate(true));
        socket.destroy();
        resolve(chain.length > 0 ? chain : undefined);
      },
    );
    socket.setTimeout(target.timeoutMs, () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.on("error", () => resolve(undefined));
  });
}
