// One call to one admission webhook, as kube-apiserver makes it: POST an
// AdmissionReview v1 over HTTPS, verify the server against the webhook's
// caBundle (the system roots when it is empty) and, for a Service, against
// `<name>.<namespace>.svc`, with Go's rules (./admission-tls.ts); give up
// after timeoutSeconds; check the answer the way upstream's
// VerifyAdmissionResponse does. Everything that goes wrong is a
// WebhookCallError, which the failurePolicy then decides about.

import { Agent, request } from "node:https";
import { isIP } from "node:net";
import type { PeerCertificate } from "node:tls";
import { isRecord } from "../../shared/is-record.ts";
import type { GoCertificate } from "../../shared/tls/go-x509.ts";
import type { WebhookClientConfig } from "./admission-rules.ts";
import { derChain, GoTlsError, goRootPool, goVerifyServer, presentedChain } from "./admission-tls.ts";
import type { ServiceMap } from "./webhook-services.ts";

const MAX_RESPONSE_BYTES = 3 * 1024 * 1024;

// Connections are kept and reused, as kube-apiserver's HTTP transport does: a
// TLS handshake per admitted write would cost both sides more than the review.
// The pool is keyed by host, port, CA and server name, so a webhook is never
// answered over a connection verified for another. Idle sockets do not keep
// the process alive, and are dropped before a Node server's 5 s keep-alive
// timeout would close them under a request.
const webhookAgent = new Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16, timeout: 4000 });

/** Worded like upstream's ErrCallingWebhook reasons; the dispatcher adds `failed calling webhook "<name>": `. */
export class WebhookCallError extends Error {
  override name = "WebhookCallError";
}

export interface AdmissionStatus {
  code?: number;
  message?: string;
  reason?: string;
  status?: string;
}

/** The part of an AdmissionReview response the API server acts on. */
export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: AdmissionStatus;
  /** base64 JSON Patch */
  patch?: string;
  patchType?: string;
  warnings?: string[];
}

interface Endpoint {
  /** What error messages show: the URL, or https://<svc>.<ns>.svc:<port><path> as upstream prints it. */
  display: string;
  /** Where the request goes. */
  target: URL;
  /** The name the certificate must carry (a Service's DNS name); undefined: the target's host. */
  servername: string | undefined;
  /** The name Go verifies: the Service's DNS name, or the URL's host (an IP without brackets). */
  verifiedName: string;
}

function endpointOf(
  config: WebhookClientConfig | undefined,
  services: ServiceMap,
  timeoutSeconds: number,
): Endpoint {
  const query = `timeout=${timeoutSeconds}s`;
  if (config?.url !== undefined) {
    let url: URL;
    try {
      url = new URL(config.url);
    } catch {
      throw new WebhookCallError(`failed to call webhook: invalid URL ${JSON.stringify(config.url)}`);
    }
    if (url.protocol !== "https:")
      throw new WebhookCallError(`failed to call webhook: ${config.url}: webhooks must use https`);
    url.search = url.search === "" ? `?${query}` : `${url.search}&${query}`;
    const verifiedName = url.hostname.replace(/^\[|\]$/g, "");
    return { display: url.href, target: url, servername: undefined, verifiedName };
  }
  const service = config?.service;
  if (!service?.name || !service.namespace)
    throw new WebhookCallError(
      "failed to call webhook: clientConfig needs a url or a service with namespace and name",
    );
  const port = service.port ?? 443;
  const host = `${service.name}.${service.namespace}.svc`;
  const path = service.path ?? "/";
  const display = `https://${host}:${port}${path}?${query}`;
  const address = services.resolve(service.namespace, service.name, port);
  if (address === undefined) {
    throw new WebhookCallError(
      `failed to call webhook: Post "${display}": service "${service.namespace}/${service.name}" is not in the sandbox service map (PUT /_sandbox/services)`,
    );
  }
  const target = new URL(address.origin);
  target.pathname = path;
  target.search = `?${query}`;
  return { display, target, servername: host, verifiedName: host };
}

/** The roots a call trusts: the caBundle as Go keeps it, or undefined for the system roots. */
interface TrustedRoots {
  pem: string[];
  roots: GoCertificate[];
}

// Every admitted write decodes its webhooks' caBundles; there are only a few distinct ones.
const decodedBundles = new Map<string, TrustedRoots>();
const MAX_DECODED_BUNDLES = 32;

function decodeCaBundle(caBundle: string | undefined): TrustedRoots | undefined {
  if (caBundle === undefined || caBundle === "") return undefined;
  const known = decodedBundles.get(caBundle);
  if (known !== undefined) return known;
  const pem = Buffer.from(caBundle, "base64").toString("utf8");
  if (!pem.includes("-----BEGIN CERTIFICATE-----"))
    throw new WebhookCallError("failed to call webhook: clientConfig.caBundle holds no PEM certificate");
  // A CA Go cannot parse is not in kube-apiserver's pool either; none left trusts nothing.
  const trusted = goRootPool(pem);
  if (decodedBundles.size >= MAX_DECODED_BUNDLES) decodedBundles.clear();
  decodedBundles.set(caBundle, trusted);
  return trusted;
}

/** OpenSSL refused the server's certificate (as opposed to a network failure). */
function isCertificateRefusal(code: string): boolean {
  return /CERT|SELF_SIGNED|UNABLE_TO|ALTNAME|ISSUER|INVALID_CA|INVALID_PURPOSE|PATH_LENGTH/.test(code);
}

interface CallContext {
  endpoint: Endpoint;
  trusted: TrustedRoots | undefined;
  timeoutSeconds: number;
  timedOut: boolean;
}

/** What went wrong, worded as kube-apiserver words it. */
async function describeCallError(err: unknown, ctx: CallContext): Promise<string> {
  const post = `failed to call webhook: Post "${ctx.endpoint.display}"`;
  if (ctx.timedOut) return `${post}: context deadline exceeded (timeout ${ctx.timeoutSeconds}s)`;
  if (err instanceof GoTlsError) return `${post}: ${err.message}`;
  const code = (err as NodeJS.ErrnoException)?.code ?? "";
  const message = err instanceof Error ? err.message : String(err);
  if (!isCertificateRefusal(code)) return `${post}: ${message}`;
  // OpenSSL said no; Go's reason needs the certificates, which a failed handshake does not leave.
  const target = ctx.endpoint.target;
  const chain = await presentedChain({
    host: target.hostname.replace(/^\[|\]$/g, ""),
    port: target.port === "" ? 443 : Number(target.port),
    servername: serverNameOf(ctx.endpoint),
    timeoutMs: 2000,
  });
  const why =
    chain &&
    goVerifyServer({
      chain,
      roots: ctx.trusted?.roots,
      host: ctx.endpoint.verifiedName,
      now: new Date(),
    });
  return `${post}: ${why ?? `tls: failed to verify certificate: ${message}`}`;
}

/** SNI: the Service's DNS name, or the URL's host unless it is an address. */
function serverNameOf(endpoint: Endpoint): string | undefined {
  if (endpoint.servername !== undefined) return endpoint.servername;
  const hostname = endpoint.target.hostname.replace(/^\[|\]$/g, "");
  return isIP(hostname) === 0 ? hostname : undefined;
}

/** A kept connection the server closed just as it was reused: nothing was processed, so send again. */
function isStaleConnection(err: unknown, reused: boolean): boolean {
  const code = (err as NodeJS.ErrnoException)?.code;
  return reused && (code === "ECONNRESET" || code === "EPIPE");
}

async function post(
  endpoint: Endpoint,
  trusted: TrustedRoots | undefined,
  body: string,
  timeoutSeconds: number,
): Promise<string> {
  const signal = AbortSignal.timeout(timeoutSeconds * 1000);
  try {
    return await postOnce(endpoint, trusted, body, timeoutSeconds, signal);
  } catch (err) {
    if (!(err instanceof StaleConnectionError)) throw err;
    return postOnce(endpoint, trusted, body, timeoutSeconds, signal, false);
  }
}

class StaleConnectionError extends Error {}

function postOnce(
  endpoint: Endpoint,
  trusted: TrustedRoots | undefined,
  body: string,
  timeoutSeconds: number,
  signal: AbortSignal,
  reuse = true,
): Promise<string> {
  const target = endpoint.target;
  const hostname = target.hostname.replace(/^\[|\]$/g, "");
  const servername = serverNameOf(endpoint);
  const fail = (err: unknown): Promise<WebhookCallError> =>
    describeCallError(err, { endpoint, trusted, timeoutSeconds, timedOut: signal.aborted }).then(
      (message) => new WebhookCallError(message),
    );
  // Called by Node once OpenSSL accepted the chain: Go's further refusals (and the host check, SANs only).
  const checkServerIdentity = (_host: string, cert: PeerCertificate): Error | undefined => {
    const why = goVerifyServer({
      chain: derChain(cert),
      roots: trusted?.roots,
      host: endpoint.verifiedName,
      now: new Date(),
    });
    return why === undefined ? undefined : new GoTlsError(why);
  };
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: hostname,
        port: target.port === "" ? 443 : Number(target.port),
        path: `${target.pathname}${target.search}`,
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          Accept: "application/json, */*",
          "Content-Length": Buffer.byteLength(body),
          "User-Agent": "kube-apiserver-admission",
        },
        ...(trusted !== undefined ? { ca: trusted.pem } : {}),
        ...(servername !== undefined ? { servername } : {}),
        checkServerIdentity,
        agent: reuse ? webhookAgent : false,
        signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            res.destroy(new Error(`response larger than ${MAX_RESPONSE_BYTES} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on("error", (err) => void fail(err).then(reject));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          const status = res.statusCode ?? 0;
          if (status < 200 || status > 299) {
            reject(
              new WebhookCallError(
                `failed to call webhook: Post "${endpoint.display}": the server answered ${status}: ${text.slice(0, 200)}`,
              ),
            );
            return;
          }
          resolve(text);
        });
      },
    );
    let answered = false;
    req.on("response", () => {
      answered = true;
    });
    req.on("error", (err) => {
      if (!answered && isStaleConnection(err, req.reusedSocket))
        reject(new StaleConnectionError(err.message));
      else void fail(err).then(reject);
    });
    req.end(body);
  });
}

/** Upstream's checks of an AdmissionReview v1 answer, in upstream's order and words. */
export function verifyAdmissionResponse(text: string, uid: string, mutating: boolean): AdmissionResponse {
  const invalid = (why: string) => new WebhookCallError(`received invalid webhook response: ${why}`);
  let review: unknown;
  try {
    review = JSON.parse(text);
  } catch (err) {
    throw invalid(`the body is not JSON: ${(err as Error).message}`);
  }
  if (!isRecord(review)) throw invalid("the body is not an AdmissionReview object");
  const response = review.response;
  if (!isRecord(response)) throw invalid("webhook response was absent");
  if (response.uid !== uid)
    throw invalid(`expected response.uid="${uid}", got "${String(response.uid ?? "")}"`);
  if (review.apiVersion !== "admission.k8s.io/v1" || review.kind !== "AdmissionReview")
    throw invalid(
      `expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got ${String(review.apiVersion ?? "")}, Kind=${String(review.kind ?? "")}`,
    );
  const patch = typeof response.patch === "string" && response.patch !== "" ? response.patch : undefined;
  const patchType =
    typeof response.patchType === "string" && response.patchType !== "" ? response.patchType : undefined;
  if (patch !== undefined && patchType === undefined)
    throw invalid("webhook returned response.patch but not response.patchType");
  if (patchType !== undefined && patch === undefined)
    throw invalid("webhook returned response.patchType but not response.patch");
  if (patchType !== undefined && !mutating)
    throw invalid("validating webhook may not return response.patchType");
  if (patchType !== undefined && patchType !== "JSONPatch")
    throw new WebhookCallError(`unsupported patch type "${patchType}"`);
  const status = isRecord(response.status) ? (response.status as AdmissionStatus) : undefined;
  return {
    uid,
    // Absent means false (Go's zero value): a webhook must say yes explicitly.
    allowed: response.allowed === true,
    ...(status ? { status } : {}),
    ...(patch !== undefined ? { patch, patchType: "JSONPatch" } : {}),
    ...(Array.isArray(response.warnings)
      ? { warnings: response.warnings.filter((w): w is string => typeof w === "string") }
      : {}),
  };
}

export interface CallOptions {
  clientConfig: WebhookClientConfig | undefined;
  services: ServiceMap;
  /** 1..30, default 10 (clamped like upstream's validation would require). */
  timeoutSeconds: number | undefined;
  review: object;
  uid: string;
  mutating: boolean;
}

export async function callWebhook(options: CallOptions): Promise<AdmissionResponse> {
  const timeoutSeconds = Math.min(30, Math.max(1, Math.floor(options.timeoutSeconds ?? 10)));
  const endpoint = endpointOf(options.clientConfig, options.services, timeoutSeconds);
  const trusted = decodeCaBundle(options.clientConfig?.caBundle);
  const text = await post(endpoint, trusted, JSON.stringify(options.review), timeoutSeconds);
  return verifyAdmissionResponse(text, options.uid, options.mutating);
}
