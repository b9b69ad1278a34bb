// A Kubernetes REST client that speaks plain JSON end to end.
//
// Why not client-node's typed APIs (CoreV1Api, ...): they deserialize into
// model classes that drop fields the library does not know (a get -> replace
// against a newer kube-apiserver would silently clear them), turn timestamps
// into Date objects, and cost CPU on the hot path. And for every request they
// build a fresh undici Agent (KubeConfig.applySecurityAuthentication ->
// createDispatcher, uncached), so with TLS options present (a cluster CA, a
// client certificate, or insecure-skip-tls-verify) every request opens a new
// connection: a TCP + TLS handshake each time and idle sockets piling up.
//
// What this client still takes from client-node: kubeconfig loading, the auth
// headers (bearer token, token file, exec, OIDC, basic, impersonation) and the
// TLS material, via KubeConfig.applyToHTTPSOptions, so token rotation keeps
// working exactly as in client-node. Requests go over HTTP/2 on Node's http2
// module when the server is HTTPS without a proxy, else through client-node's
// own undici dispatcher (proxies, plain HTTP); see ./transport.ts. Either way
// the transport is built once and reused for as long as the TLS material stays
// the same, so connections are kept alive; when the material changes (a
// rotated client certificate) a new one is built and the old one is closed
// after its in-flight requests.

import { STATUS_CODES } from "node:http";
import type { RequestOptions } from "node:https";
import { HttpMethod, type KubeConfig, RequestContext } from "@kubernetes/client-node";
// undici is client-node's own HTTP stack (its fetch and its dispatchers); the
// dispatcher objects it hands us are undici 8 Agents, so we drive them with the
// same package rather than Node's bundled copy.
import { Agent, type Dispatcher } from "undici";
import { isRecord } from "../is-record.ts";
import { apiStatusOf, networkErrorCodeOf, statusCodeOf } from "./api-errors.ts";
import { type ApiRate, TokenBucket } from "./rate-limiter.ts";
import { apiVersionOf, type ResourceDescriptor } from "./resources.ts";
import { type KubeTransport, openTransport, UndiciTransport } from "./transport.ts";
import type { KubeObject } from "./types.ts";

export interface KubeJsonClientOptions {
  /** Per request, connect to last body byte. Past it the request fails as transient. Default 30 s. */
  requestTimeoutMs?: number;
  userAgent?: string;
  /** Client-side cap on requests (upstream --kube-api-qps / --kube-api-burst); unset: none. */
  rate?: ApiRate | undefined;
  /** How long one computation of the auth headers and TLS material serves requests. Default 1000 ms; 0: every request. */
  authReuseMs?: number;
  /** "auto" (default): HTTP/2 on Node's http2 where the server offers it, else undici; "undici": always undici. */
  transport?: "auto" | "undici";
}

export interface ListOptions {
  /** Omitted for a namespaced kind: all namespaces. */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Items per page (`limit`); pages are followed to the end. 0 = one unpaged request. Default 500, like client-go's pager. */
  pageSize?: number;
}

export interface ListResult<T> {
  items: T[];
  /** The list's resourceVersion: a consistent snapshot to start a watch from. */
  resourceVersion: string;
}

export interface DeleteOptions {
  preconditions?: { uid?: string; resourceVersion?: string };
  /** "Orphan" | "Background" | "Foreground" */
  propagationPolicy?: string;
  /** 0 deletes a pod at once (a kubelet's final delete); unset: the object's default. */
  gracePeriodSeconds?: number;
}

export type PatchType = "json" | "merge" | "strategic";

const PATCH_CONTENT_TYPES: Record<PatchType, string> = {
  json: "application/json-patch+json",
  merge: "application/merge-patch+json",
  strategic: "application/strategic-merge-patch+json",
};

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_AUTH_REUSE_MS = 1000;
const DEFAULT_PAGE_SIZE = 500;
const DEFAULT_USER_AGENT = `kube-storage-functions (node/${process.versions.node})`;

/** The API server answered with a non-2xx status. Classified by api-errors.ts through `code` and `body`. */
export class KubeApiError extends Error {
  override name = "KubeApiError";
  /** The HTTP status. */
  readonly code: number;
  /** The parsed metav1.Status when the server sent JSON, else the response text. */
  readonly body: unknown;
  /** Response headers, lower-cased (Retry-After lives here). */
  readonly headers: Record<string, string>;
  readonly method: string;
  readonly path: string;

  constructor(method: string, path: string, code: number, body: unknown, headers: Record<string, string>) {
    const status = apiStatusOf({ body });
    const detail =
      status?.message ?? (typeof body === "string" ? body.slice(0, 300) : JSON.stringify(body).slice(0, 300));
    super(`${method} ${path}: ${code} ${status?.reason ?? STATUS_CODES[code] ?? ""}: ${detail}`.trim());
    this.code = code;
    this.body = body;
    this.headers = headers;
    this.method = method;
    this.path = path;
  }

  /** The Status reason (NotFound, Conflict, AlreadyExists, Invalid, ...), if the server sent one. */
  get reason(): string | undefined {
    return apiStatusOf(this)?.reason;
  }
}

/**
 * No HTTP answer: connection refused or reset, TLS failure, or the per-request
 * timeout. `code` is the network error code (ETIMEDOUT for our own timeout);
 * isTransient recognises the retryable ones through it and the `cause` chain.
 */
export class KubeRequestError extends Error {
  override name = "KubeRequestError";
  readonly code: string | undefined;
  readonly method: string;
  readonly path: string;

  constructor(method: string, path: string, message: string, code: string | undefined, cause: unknown) {
    super(`${method} ${path}: ${message}`, { cause });
    this.code = code;
    this.method = method;
    this.path = path;
  }
}

/** The TLS-relevant part of what applyToHTTPSOptions produced; a change means a new dispatcher. */
interface TlsMaterial {
  server: string;
  proxyUrl: string | undefined;
  ca: unknown;
  cert: unknown;
  key: unknown;
  pfx: unknown;
  passphrase: unknown;
  rejectUnauthorized: unknown;
  servername: unknown;
}

function sameValue(a: unknown, b: unknown): boolean {
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b);
  return a === b;
}

function sameMaterial(a: TlsMaterial, b: TlsMaterial): boolean {
  return (
    a.server === b.server &&
    a.proxyUrl === b.proxyUrl &&
    sameValue(a.ca, b.ca) &&
    sameValue(a.cert, b.cert) &&
    sameValue(a.key, b.key) &&
    sameValue(a.pfx, b.pfx) &&
    a.passphrase === b.passphrase &&
    a.rejectUnauthorized === b.rejectUnauthorized &&
    a.servername === b.servername
  );
}

interface Connection {
  material: TlsMaterial;
  transport: Promise<KubeTransport>;
}

type Query = Record<string, string | number | undefined>;

function queryString(query: Query | undefined): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined) params.set(key, String(value));
  }
  const s = params.toString();
  return s === "" ? "" : `?${s}`;
}

function flattenHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers)) {
    if (value !== undefined) out[key.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

export class KubeJsonClient {
  readonly kubeConfig: KubeConfig;
  private readonly timeoutMs: number;
  private readonly userAgent: string;
  private readonly bucket: TokenBucket | undefined;
  private connection: Connection | undefined;
  private closed = false;
  private base: { server: string; origin: string; pathPrefix: string } | undefined;
  private auth: { at: number; options: Promise<RequestOptions> } | undefined;
  private readonly authReuseMs: number;
  private readonly transportKind: "auto" | "undici";

  constructor(kc: KubeConfig, options: KubeJsonClientOptions = {}) {
    this.kubeConfig = kc;
    this.timeoutMs = options.requestTimeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.authReuseMs = options.authReuseMs ?? DEFAULT_AUTH_REUSE_MS;
    this.transportKind = options.transport ?? "auto";
    if (!(this.timeoutMs > 0)) throw new TypeError("requestTimeoutMs must be a positive number");
    this.userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
    this.bucket = options.rate ? new TokenBucket(options.rate) : undefined;
  }

  async get<T extends KubeObject>(r: ResourceDescriptor, name: string, namespace?: string): Promise<T> {
    return (await this.request("GET", itemPath(r, name, namespace))) as T;
  }

  /** Follows `continue` to the end; items get apiVersion/kind filled in (lists omit them). */
  async list<T extends KubeObject>(r: ResourceDescriptor, opts: ListOptions = {}): Promise<ListResult<T>> {
    const pageSize = opts.pageSize ?? DEFAULT_PAGE_SIZE;
    if (!Number.isInteger(pageSize) || pageSize < 0)
      throw new TypeError(`list ${r.plural}: pageSize must be a non-negative integer, got ${pageSize}`);
    if (!r.namespaced && opts.namespace)
      throw new TypeError(`${r.plural} is cluster-scoped; list it without a namespace`);
    const path = collectionPath(r, opts.namespace);
    const selectors = { labelSelector: opts.labelSelector, fieldSelector: opts.fieldSelector };

    const items: T[] = [];
    let resourceVersion: string | undefined;
    let cont: string | undefined;
    do {
      let page: unknown;
      try {
        page = await this.request("GET", path, {
          query: { ...selectors, limit: pageSize || undefined, continue: cont },
        });
      } catch (err) {
        // The continue token outlived etcd compaction (410 Gone). Like
        // client-go's ListPager, fall back to one full list: slower, but
        // a consistent snapshot rather than a partial one.
        if (cont !== undefined && statusCodeOf(err) === 410) {
          return this.list<T>(r, { ...opts, pageSize: 0 });
        }
        throw err;
      }
      const list = asList(page, r, path);
      // All pages of one list share the first page's snapshot.
      resourceVersion ??= list.resourceVersion;
      for (const item of list.items) items.push(withTypeMeta(item, r) as T);
      cont = list.continue;
    } while (cont);
    return { items, resourceVersion: resourceVersion ?? "" };
  }

  /** POST; a missing apiVersion/kind is filled in from the descriptor. */
  async create<T extends KubeObject>(
    r: ResourceDescriptor,
    obj: T,
    opts: { dryRun?: boolean } = {},
  ): Promise<T> {
    checkKind(r, obj);
    const path = collectionPath(r, objectNamespace(r, obj));
    const body = { ...obj, apiVersion: obj.apiVersion || apiVersionOf(r), kind: obj.kind || r.kind };
    return (await this.request("POST", path, {
      body: JSON.stringify(body),
      query: opts.dryRun ? { dryRun: "All" } : undefined,
    })) as T;
  }

  /**
   * PUT the whole object, conditional on its metadata.resourceVersion (the
   * server answers 409 Conflict if it moved on). An object without one is a
   * programming error here: it would be a blind overwrite.
   */
  async replace<T extends KubeObject>(
    r: ResourceDescriptor,
    obj: T,
    opts: { subresource?: "status" } = {},
  ): Promise<T> {
    checkKind(r, obj);
    if (!obj.metadata?.resourceVersion)
      throw new TypeError(
        `replace ${r.kind} ${obj.metadata?.name}: metadata.resourceVersion is required (writes are conditional)`,
      );
    const path = itemPath(r, obj.metadata.name, objectNamespace(r, obj), opts.subresource);
    const body = { ...obj, apiVersion: obj.apiVersion || apiVersionOf(r), kind: obj.kind || r.kind };
    return (await this.request("PUT", path, { body: JSON.stringify(body) })) as T;
  }

  /**
   * PATCH with the content type of the patch kind. A merge/strategic patch is
   * only conditional if it carries metadata.resourceVersion; a JSON patch if it
   * has a `test` op. Strategic merge works on built-in kinds only, not CRDs.
   */
  async patch<T extends KubeObject>(
    r: ResourceDescriptor,
    name: string,
    namespace: string | undefined,
    patch: unknown,
    type: PatchType,
    opts: { subresource?: "status" } = {},
  ): Promise<T> {
    const contentType = PATCH_CONTENT_TYPES[type];
    if (contentType === undefined) throw new TypeError(`patch ${r.kind} ${name}: unknown patch type ${type}`);
    if (type === "json" ? !Array.isArray(patch) : !isRecord(patch))
      throw new TypeError(
        `patch ${r.kind} ${name}: a ${type} patch must be ${type === "json" ? "an array of operations" : "an object"}`,
      );
    const path = itemPath(r, name, namespace, opts.subresource);
    return (await this.request("PATCH", path, { body: JSON.stringify(patch), contentType })) as T;
  }

  /**
   * DELETE. Resolves to the object while it still exists, held by finalizers
   * or a grace period (the answer carries metadata.deletionTimestamp), and to
   * undefined once it is gone. kube-apiserver answers an immediate delete
   * with a Status for built-in kinds but with the last state for CRDs (and
   * the sandbox does the latter for all), hence the deletionTimestamp test.
   */
  async delete(
    r: ResourceDescriptor,
    name: string,
    namespace?: string,
    opts: DeleteOptions = {},
  ): Promise<KubeObject | undefined> {
    const path = itemPath(r, name, namespace);
    const hasOptions =
      opts.preconditions !== undefined ||
      opts.propagationPolicy !== undefined ||
      opts.gracePeriodSeconds !== undefined;
    const body = hasOptions
      ? JSON.stringify({
          apiVersion: "v1",
          kind: "DeleteOptions",
          ...(opts.preconditions ? { preconditions: opts.preconditions } : {}),
          ...(opts.propagationPolicy ? { propagationPolicy: opts.propagationPolicy } : {}),
          ...(opts.gracePeriodSeconds !== undefined ? { gracePeriodSeconds: opts.gracePeriodSeconds } : {}),
        })
      : undefined;
    const answer = await this.request("DELETE", path, body === undefined ? {} : { body });
    if (!isRecord(answer) || answer.kind === "Status") return undefined;
    const meta = answer.metadata;
    return isRecord(meta) && meta.deletionTimestamp ? (withTypeMeta(answer, r) as KubeObject) : undefined;
  }

  /** Closes the pooled connections (after in-flight requests). The client is unusable afterwards. */
  async close(): Promise<void> {
    this.closed = true;
    const connection = this.connection;
    this.connection = undefined;
    if (connection) await connection.transport.then((t) => t.close()).catch(() => {});
  }

  /** Which transport carries the requests now ("h2" or "undici"), once one was needed. */
  async protocol(): Promise<KubeTransport["protocol"] | undefined> {
    return this.connection?.transport.then((t) => t.protocol).catch(() => undefined);
  }

  /** One request: fresh auth headers, pooled connection, timeout, JSON in and out. */
  private async request(
    method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE",
    path: string,
    options: { query?: Query | undefined; body?: string; contentType?: string } = {},
  ): Promise<unknown> {
    if (this.closed) throw new Error("KubeJsonClient is closed");
    // Before the request's own timeout starts: waiting for our turn is not the server being slow.
    if (this.bucket) await this.bucket.take();
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error("the kubeconfig has no current cluster");

    const https = await this.authOptions();
    // Not awaited yet: a failed connect is answered like a failed request, below.
    const transportReady = this.transportFor({
      server: cluster.server,
      proxyUrl: cluster.proxyUrl,
      ca: https.ca,
      cert: https.cert,
      key: https.key,
      pfx: https.pfx,
      passphrase: https.passphrase,
      rejectUnauthorized: https.rejectUnauthorized,
      servername: https.servername,
    });

    const headers: Record<string, string> = {};
    for (const [key, value] of Object.entries(https.headers ?? {})) {
      if (value !== undefined) headers[key] = Array.isArray(value) ? value.join(", ") : String(value);
    }
    if (https.auth) headers.Authorization = `Basic ${Buffer.from(https.auth).toString("base64")}`;
    headers.Accept = "application/json";
    headers["User-Agent"] = this.userAgent;
    if (options.body !== undefined) headers["Content-Type"] = options.contentType ?? "application/json";

    const base = this.baseOf(cluster.server);
    const fullPath = `${base.pathPrefix}${path}${queryString(options.query)}`;
    const signal = AbortSignal.timeout(this.timeoutMs);

    let statusCode: number;
    let responseHeaders: () => Record<string, string | string[] | undefined>;
    let text: string;
    try {
      const transport = await transportReady;
      const res = await transport.request({
        origin: base.origin,
        path: fullPath,
        method,
        headers,
        body: options.body ?? null,
        signal,
      });
      statusCode = res.statusCode;
      responseHeaders = res.headers;
      text = res.text;
    } catch (err) {
      if (signal.aborted) {
        throw new KubeRequestError(method, path, `no answer within ${this.timeoutMs} ms`, "ETIMEDOUT", err);
      }
      const code = networkErrorCodeOf(err);
      throw new KubeRequestError(method, path, (err as Error)?.message ?? String(err), code, err);
    }

    if (statusCode < 200 || statusCode > 299) {
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // Not JSON (a proxy's HTML page, say): keep the text.
      }
      throw new KubeApiError(method, path, statusCode, body, flattenHeaders(responseHeaders()));
    }
    if (text === "") return undefined;
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new Error(`${method} ${path}: ${statusCode} answer is not JSON: ${text.slice(0, 200)}`, {
        cause: err,
      });
    }
  }

  /** Origin and path prefix (servers behind a proxy path like /k8s/clusters/c-1) of the server URL, parsed once. */
  private baseOf(server: string): { origin: string; pathPrefix: string } {
    if (this.base?.server !== server) {
      const url = new URL(server);
      this.base = { server, origin: url.origin, pathPrefix: url.pathname.replace(/\/+$/, "") };
    }
    return this.base;
  }

  /**
   * Auth headers and TLS material, exactly as client-node computes them for
   * its own requests (authenticators cache and refresh tokens themselves),
   * reused for authReuseMs: client-node reads the CA, certificate, key and
   * token files from disk on every call, about a quarter of a request's CPU
   * here. A rotated token or certificate is still picked up within that window.
   */
  private authOptions(): Promise<RequestOptions> {
    const now = performance.now();
    if (this.auth && now - this.auth.at < this.authReuseMs) return this.auth.options;
    const https: RequestOptions = { headers: {} };
    const options = this.kubeConfig.applyToHTTPSOptions(https).then(() => https);
    const entry = { at: now, options };
    this.auth = entry;
    // A failure (an exec plugin that failed, a file mid-rotation) is not reused.
    options.catch(() => {
      if (this.auth === entry) this.auth = undefined;
    });
    return options;
  }

  /** The pooled transport for this TLS material; built on first use and on change. */
  private transportFor(material: TlsMaterial): Promise<KubeTransport> {
    const current = this.connection;
    if (current && sameMaterial(current.material, material)) return current.transport;
    const transport =
      this.transportKind === "undici"
        ? this.buildDispatcher(material.server).then((d) => new UndiciTransport(d))
        : openTransport({ server: material.server, proxyUrl: material.proxyUrl, tls: material }, () =>
            this.buildDispatcher(material.server),
          );
    this.connection = { material, transport };
    if (current) {
      // Close the old pool once requests that already picked it up have
      // started (close() then waits for them); closing at once would fail a
      // request sitting between picking the pool and dispatching on it.
      const old = current.transport;
      setTimeout(() => {
        old.then((t) => t.close()).catch(() => {});
      }, 1_000).unref();
    }
    // A failed build must not be cached, or every later request would fail too.
    transport.catch(() => {
      if (this.connection?.transport === transport) this.connection = undefined;
    });
    return transport;
  }

  private async buildDispatcher(server: string): Promise<Dispatcher> {
    const context = new RequestContext(server, HttpMethod.GET);
    await this.kubeConfig.applySecurityAuthentication(context);
    // No TLS options and no proxy: client-node would use undici's global
    // dispatcher; we keep a pool of our own with the same TCP keep-alive.
    return (
      context.getDispatcher() ?? new Agent({ connect: { keepAlive: true, keepAliveInitialDelay: 30_000 } })
    );
  }
}

function checkScope(r: ResourceDescriptor, namespace: string | undefined): void {
  if (r.namespaced && !namespace) throw new TypeError(`${r.plural} is namespaced: a namespace is required`);
  if (!r.namespaced && namespace)
    throw new TypeError(`${r.plural} is cluster-scoped: no namespace expected, got "${namespace}"`);
}

function prefixOf(r: ResourceDescriptor): string {
  return r.group === "" ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
}

/** Namespaced kinds without a namespace list across all namespaces. */
function collectionPath(r: ResourceDescriptor, namespace: string | undefined): string {
  if (namespace) return `${prefixOf(r)}/namespaces/${encodeURIComponent(namespace)}/${r.plural}`;
  return `${prefixOf(r)}/${r.plural}`;
}

function itemPath(
  r: ResourceDescriptor,
  name: string,
  namespace: string | undefined,
  subresource?: "status",
): string {
  if (typeof name !== "string" || name === "") throw new TypeError(`${r.kind}: a name is required`);
  checkScope(r, namespace);
  if (subresource !== undefined && subresource !== "status")
    throw new TypeError(`${r.kind}: unsupported subresource ${subresource}`);
  const path = `${collectionPath(r, namespace)}/${encodeURIComponent(name)}`;
  return subresource ? `${path}/${subresource}` : path;
}

function objectNamespace(r: ResourceDescriptor, obj: KubeObject): string | undefined {
  const namespace = obj.metadata?.namespace;
  checkScope(r, namespace);
  return namespace;
}

function checkKind(r: ResourceDescriptor, obj: KubeObject): void {
  if (!isRecord(obj) || !isRecord(obj.metadata))
    throw new TypeError(`${r.kind}: expected an object with metadata`);
  if (obj.kind && obj.kind !== r.kind)
    throw new TypeError(`expected a ${r.kind}, got a ${obj.kind} (${obj.metadata.name})`);
  if (obj.apiVersion && obj.apiVersion !== apiVersionOf(r))
    throw new TypeError(
      `${r.kind} ${obj.metadata.name}: apiVersion ${obj.apiVersion}, expected ${apiVersionOf(r)}`,
    );
}

function asList(
  page: unknown,
  r: ResourceDescriptor,
  path: string,
): { items: unknown[]; resourceVersion: string | undefined; continue: string | undefined } {
  if (!isRecord(page) || !Array.isArray(page.items))
    throw new Error(`GET ${path}: expected a ${r.kind}List, got ${JSON.stringify(page)?.slice(0, 200)}`);
  const meta = isRecord(page.metadata) ? page.metadata : {};
  return {
    items: page.items,
    resourceVersion: typeof meta.resourceVersion === "string" ? meta.resourceVersion : undefined,
    continue: typeof meta.continue === "string" && meta.continue !== "" ? meta.continue : undefined,
  };
}

/** kube-apiserver leaves apiVersion/kind off list items; put them back so items can be written as they are. */
function withTypeMeta(item: unknown, r: ResourceDescriptor): unknown {
  if (!isRecord(item)) return item;
  if (item.apiVersion === undefined || item.apiVersion === "") item.apiVersion = apiVersionOf(r);
  if (item.kind === undefined || item.kind === "") item.kind = r.kind;
  return item;
}
