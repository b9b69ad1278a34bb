// What the TLS tests share: an HTTPS client that trusts exactly the CA it is
// given (never the system store) and reports the certificate it was served,
// and a runner for `npm run certs` as a real process.
import { spawn } from "node:child_process";
import { generateKeyPairSync, X509Certificate } from "node:crypto";
import { request } from "node:https";
import { isIP } from "node:net";
import { TLSSocket } from "node:tls";
import { fileURLToPath } from "node:url";
import forge from "node-forge";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

export interface HttpsAnswer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
  /** SHA-256 fingerprint of the certificate the server presented. */
  fingerprint: string;
}

export interface HttpsRequest {
  method?: string;
  ca: string | string[];
  /** SNI and the name checked against the SANs; defaults to the URL's host. */
  servername?: string;
  headers?: Record<string, string>;
  body?: string;
}

/** One request on a fresh connection (agent: false), so a reloaded certificate is seen at once. */
export function httpsFetch(url: string, options: HttpsRequest): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: options.method ?? "GET",
        ca: options.ca,
        agent: false,
        ...(options.servername !== undefined ? { servername: options.servername } : {}),
        headers: options.headers ?? {},
      },
      (res) => {
        const cert = res.socket instanceof TLSSocket ? res.socket.getPeerCertificate() : undefined;
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            body,
            headers: res.headers,
            fingerprint: cert?.fingerprint256 ?? "",
          }),
        );
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

export function fingerprintOf(pem: string): string {
  return new X509Certificate(pem).fingerprint256;
}

export interface ScriptRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `npm run --silent certs -- <args>` from the repository root, as an operator runs it. */
export function runCerts(args: string[], env: Record<string, string | undefined> = {}): Promise<ScriptRun> {
  return new Promise((resolve, reject) => {
    const childEnv: NodeJS.ProcessEnv = { ...process.env };
    delete childEnv.KUBECONFIG;
    for (const [key, value] of Object.entries(env)) {
      if (value === undefined) delete childEnv[key];
      else childEnv[key] = value;
    }
    const child = spawn("npm", ["run", "--silent", "certs", "--", ...args], {
      cwd: repoRoot,
      env: childEnv,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

/** The JSON summary `npm run certs` prints as its last stdout line. */
export function summaryOf(run: ScriptRun): Record<string, unknown> {
  const lines = run.stdout.trim().split("\n");
  return JSON.parse(lines[lines.length - 1] ?? "{}") as Record<string, unknown>;
}

export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * A CA and serving certificate made as `npm run certs` used to make them: the
 * CA's commonName `<service>-ca@<unix>` in node-forge's default
 * PrintableString, which Go refuses. Otherwise sound (SANs, key, signature).
 */
export function printableStringCertificates(
  service: string,
  namespace: string,
  sans: readonly string[],
): { caCert: string; caKey: string; cert: string; key: string } {
  const keys = () => {
    const { privateKey } = generateKeyPairSync("rsa", {
      modulusLength: 2048,
      privateKeyEncoding: { type: "pkcs8", format: "pem" },
      publicKeyEncoding: { type: "spki", format: "pem" },
    });
    const key = forge.pki.privateKeyFromPem(privateKey) as forge.pki.rsa.PrivateKey;
    return { key, pem: privateKey, publicKey: forge.pki.rsa.setPublicKey(key.n, key.e) };
  };
  const now = Date.now();
  const build = (subject: forge.pki.CertificateField[], serial: string) => {
    const cert = forge.pki.createCertificate();
    cert.serialNumber = serial;
    cert.validity.notBefore = new Date(now - 60_000);
    cert.validity.notAfter = new Date(now + 365 * 24 * 3600_000);
    cert.setSubject(subject);
    cert.setIssuer(caName);
    return cert;
  };
  const caName = [{ name: "commonName", value: `${service}-ca@${Math.floor(now / 1000)}` }];
  const ca = keys();
  const caCert = build(caName, "01");
  caCert.publicKey = ca.publicKey;
  caCert.setExtensions([
    { name: "basicConstraints", cA: true, critical: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
  ]);
  caCert.sign(ca.key, forge.md.sha256.create());
  const leaf = keys();
  const cert = build([{ name: "commonName", value: `${service}.${namespace}.svc` }], "02");
  cert.publicKey = leaf.publicKey;
  cert.setExtensions([
    { name: "basicConstraints", cA: false },
    { name: "extKeyUsage", serverAuth: true },
    {
      name: "subjectAltName",
      altNames: sans.map((value) => (isIP(value) ? { type: 7, ip: value } : { type: 2, value })),
    },
  ]);
  cert.sign(ca.key, forge.md.sha256.create());
  return {
    caCert: forge.pki.certificateToPem(caCert),
    caKey: ca.pem,
    cert: forge.pki.certificateToPem(cert),
    key: leaf.pem,
  };
}
