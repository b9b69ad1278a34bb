// The sandbox API server: a real HTTP server speaking the Kubernetes REST
// protocol over the in-memory registry. Used by `npm start` and the tests;
// never in production.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type UserInfo, WebhookAdmission } from "./admission.ts";
import { type AdmissionContext, AdmittedWrites } from "./admitted-writes.ts";
import { coreVersions, group, groupList, resourceList, serverVersion } from "./discovery.ts";
import { FaultInjector, parseFaultSettings } from "./faults.ts";
import { goJson, goJsonList } from "./map-keys.ts";
import { bindPod } from "./pod-binding.ts";
import { type ListResult, Registry } from "./registry.ts";
import { apiVersionOf, findResourceType, type ResourceType } from "./resources.ts";
import { ApiError, badRequest, gone, methodNotAllowed } from "./status.ts";
import { STORAGE_ADMISSION_PLUGINS, type StorageAdmissionPlugin } from "./storage-admission.ts";
import { type KubeObject, ObjectStore, type StoredChange, TooOldResourceVersionError } from "./store.ts";
import { toTable, wantsTable } from "./tables.ts";
import { TokenRegistry } from "./tokens.ts";
import { ServiceMap } from "./webhook-services.ts";

const maxBodyBytes = 3 * 1024 * 1024;
const defaultNamespaces = ["default", "kube-system", "kube-public", "kube-node-lease"];

export interface ApiServerOptions {
  port?: number;
  host?: string;
  /** How many changes watches can replay before a resume answers 410 Gone. */
  historyLimit?: number;
  /**
   * DELETE of a scheduled pod marks it for its kubelet instead of removing it.
   * Off by default: with no kubelet, such a pod would stay forever.
   */
  gracefulPodDeletion?: boolean;
  /** kube-apiserver's --disable-admission-plugins, for the storage plugins it runs by default (storage-admission.ts). */
  disableAdmissionPlugins?: readonly StorageAdmissionPlugin[];
}

export interface ApiServerHandle {
  url: string;
  server: Server;
  registry: Registry;
  store: ObjectStore;
  faults: FaultInjector;
  counters: Map<string, number>;
  /** Where webhook `clientConfig.service`s point (also PUT /_sandbox/services). */
  services: ServiceMap;
  /** Bearer tokens the TokenReview API accepts (also PUT /_sandbox/tokens). */
  tokens: TokenRegistry;
  setBaseline(objects: object[]): void;
  close(): Promise<void>;
}

/** A parsed Kubernetes resource path. */
interface ResourceRequest {
  type: ResourceType;
  namespace: string | undefined;
  name: string | undefined;
  subresource: "status" | "binding" | undefined;
  watchPrefix: boolean;
}

function send(
  res: ServerResponse,
  code: number,
  body: unknown,
  headers: Record<string, string | string[]> = {},
): void {
  sendText(res, code, JSON.stringify(body), headers);
}

/** An object of type t, its maps' keys in Go's order (see map-keys.ts). */
function sendObject(
  res: ServerResponse,
  code: number,
  t: ResourceType,
  o: unknown,
  headers: Record<string, string | string[]> = {},
): void {
  sendText(res, code, goJson(t, o), headers);
}

function sendText(
  res: ServerResponse,
  code: number,
  text: string,
  headers: Record<string, string | string[]> = {},
): void {
  res.writeHead(code, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** Admission webhooks' warnings as kube-apiserver forwards them: `Warning: 299 - "<text>"`. */
function warningHeaders(warnings: readonly string[]): Record<string, string[]> {
  if (warnings.length === 0) return {};
  // Header values are printable ASCII: escape quotes, replace anything else.
  const quote = (w: string) => `"${w.replace(/[\\"]/g, (c) => `\\${c}`).replace(/[^\x20-\x7e]/g, "?")}"`;
  return { Warning: warnings.map((w) => `299 - ${quote(w)}`) };
}

/** What admission webhooks see as the requesting user. */
const sandboxAdmin: UserInfo = { username: "sandbox", groups: ["system:masters", "system:authenticated"] };

function sendError(res: ServerResponse, err: ApiError): void {
  const headers: Record<string, string> = {};
  if (err.details?.retryAfterSeconds) headers["Retry-After"] = String(err.details.retryAfterSeconds);
  send(res, err.code, err.toStatus(), headers);
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const b = chunk as Buffer;
    size += b.length;
    if (size > maxBodyBytes)
      throw new ApiError(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728");
    chunks.push(b);
  }
  if (size === 0) return undefined;
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    throw badRequest("the body of the request could not be decoded as JSON");
  }
}

/**
 * A create or update body must be JSON. Parsed as Go's mime.ParseMediaType
 * (case and parameters ignored; none given means JSON). kube-apiserver also
 * reads YAML and protobuf; the 415 names only what the sandbox reads.
 */
function requireJson(req: IncomingMessage): void {
  const ct = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  if (ct !== "" && ct !== "application/json") {
    throw new ApiError(
      415,
      "UnsupportedMediaType",
      "the body of the request was in an unknown format - accepted media types include: application/json",
    );
  }
}

/** Splits /api/v1/... and /apis/<group>/<version>/... into a resource request, or undefined if not one. */
function parseResourcePath(segments: string[]): ResourceRequest | "unknown" | undefined {
  let groupName: string;
  let version: string;
  let rest: string[];
  if (segments[0] === "api" && segments.length >= 3) {
    groupName = "";
    version = segments[1]!;
    rest = segments.slice(2);
  } else if (segments[0] === "apis" && segments.length >= 4) {
    groupName = segments[1]!;
    version = segments[2]!;
    rest = segments.slice(3);
  } else {
    return undefined;
  }
  let watchPrefix = false;
  if (rest[0] === "watch") {
    watchPrefix = true;
    rest = rest.slice(1);
  }
  let namespace: string | undefined;
  if (rest[0] === "namespaces" && rest.length >= 3 && rest[2] !== "status" && rest[2] !== "finalize") {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [plural, name, sub, ...extra] = rest;
  if (!plural || extra.length > 0) return "unknown";
  const type = findResourceType(groupName, version, plural);
  if (!type) return "unknown";
  if (namespace !== undefined && !type.namespaced) return "unknown";
  if (sub === "binding" && type.plural === "pods" && type.group === "" && name && !watchPrefix) {
    return { type, namespace, name, subresource: "binding", watchPrefix };
  }
  if (sub !== undefined && !(sub === "status" && type.hasStatus)) return "unknown";
  return { type, namespace, name, subresource: sub === "status" ? "status" : undefined, watchPrefix };
}

function verbOf(method: string, r: ResourceRequest, query: URLSearchParams): string {
  switch (method) {
    case "GET":
      if (r.watchPrefix || query.get("watch") === "true" || query.get("watch") === "1") return "watch";
      return r.name ? "get" : "list";
    case "POST":
      return "create";
    case "PUT":
      return "update";
    case "PATCH":
      return "patch";
    case "DELETE":
      return r.name ? "delete" : "deletecollection";
    default:
      return "unknown";
  }
}

/**
 * A list as kube-apiserver writes it. A typed list's items carry no kind or
 * apiVersion of their own. A custom resource's list is an unstructured map:
 * every key sorted, and its items keep their kind and apiVersion.
 */
function listJson(t: ResourceType, result: ListResult): string {
  if (t.customResource) {
    return goJsonList(t, { apiVersion: apiVersionOf(t) }, result.items, (o) => o, {
      kind: t.listKind,
      metadata: sortedListMeta(result),
    });
  }
  return goJsonList(
    t,
    { kind: t.listKind, apiVersion: apiVersionOf(t), metadata: listMeta(result) },
    result.items,
    withoutTypeMeta,
  );
}

function sortedListMeta(result: ListResult): Record<string, unknown> {
  const meta = listMeta(result);
  return Object.fromEntries(
    Object.keys(meta)
      .sort()
      .map((k) => [k, meta[k]]),
  );
}

/** ListMeta: `continue` only when more remain; remainingItemCount only when the registry counted it. */
function listMeta(result: ListResult): Record<string, unknown> {
  return {
    resourceVersion: result.resourceVersion,
    ...(result.continueToken ? { continue: result.continueToken } : {}),
    ...(result.remainingItemCount !== undefined ? { remainingItemCount: result.remainingItemCount } : {}),
  };
}

/** A shallow copy without kind and apiVersion (the stored object stays as it is). */
function withoutTypeMeta(o: KubeObject): Omit<KubeObject, "kind" | "apiVersion"> {
  const { kind: _kind, apiVersion: _apiVersion, ...rest } = o;
  return rest;
}

/** DeleteOptions.gracePeriodSeconds from the body, else the query parameter. */
function gracePeriodOf(body: unknown, query: URLSearchParams): number | undefined {
  const given =
    body && typeof body === "object" && "gracePeriodSeconds" in body
      ? (body as { gracePeriodSeconds: unknown }).gracePeriodSeconds
      : (query.get("gracePeriodSeconds") ?? undefined);
  if (given === undefined || given === null) return undefined;
  const n = typeof given === "string" && /^-?\d+$/.test(given) ? Number(given) : given;
  if (typeof n !== "number" || !Number.isSafeInteger(n))
    throw badRequest(`gracePeriodSeconds: must be an integer, got ${JSON.stringify(given)}`);
  return n;
}

function includeObjectParam(query: URLSearchParams): "None" | "Metadata" | "Object" {
  const v = query.get("includeObject");
  return v === "None" || v === "Object" ? v : "Metadata";
}

export class SandboxApiServer {
  readonly store: ObjectStore;
  readonly registry: Registry;
  readonly faults = new FaultInjector();
  readonly counters = new Map<string, number>();
  readonly services = new ServiceMap();
  readonly tokens = new TokenRegistry();
  readonly admission: WebhookAdmission;
  private readonly writes: AdmittedWrites;
  /** Open watch streams and how to end each one (unsubscribe first, then end the response). */
  private readonly watches = new Map<ServerResponse, () => void>();
  private serverAddress = "127.0.0.1:0";
  /** Objects every fresh (and reset) sandbox has, like the nodes of a cluster. */
  private baseline: object[] = [];

  constructor(options: ApiServerOptions = {}) {
    this.store = new ObjectStore({ historyLimit: options.historyLimit ?? 10_000 });
    this.registry = new Registry(this.store);
    this.registry.gracefulPodDeletion = options.gracefulPodDeletion ?? false;
    const disabled = new Set(options.disableAdmissionPlugins ?? []);
    this.registry.admissionPlugins = new Set(STORAGE_ADMISSION_PLUGINS.filter((p) => !disabled.has(p)));
    this.admission = new WebhookAdmission(this.store, this.services);
    this.writes = new AdmittedWrites(this.registry, this.admission);
    this.seedDefaults();
  }

  private seedDefaults(): void {
    for (const ns of defaultNamespaces) {
      this.registry.seed({
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: ns },
        status: { phase: "Active" },
      });
    }
    for (const o of this.baseline) this.registry.seed(o);
  }

  /** Seeds `objects` now and again after every reset. */
  setBaseline(objects: object[]): void {
    this.baseline = objects.map((o) => structuredClone(o));
    for (const o of this.baseline) this.registry.seed(o);
  }

  /** Forget everything: objects, counters, faults, services, tokens. Open watches are closed. */
  reset(): void {
    // Stop every watch before the store changes under it: an ended stream must not be written to.
    for (const end of [...this.watches.values()]) end();
    this.watches.clear();
    this.store.clear();
    this.counters.clear();
    this.faults.clear();
    this.services.clear();
    this.tokens.clear();
    this.admission.ignoredFailures.length = 0;
    this.seedDefaults();
  }

  setServerAddress(address: string): void {
    this.serverAddress = address;
  }

  handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.route(req, res).catch((err: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (err instanceof ApiError) sendError(res, err);
      else sendError(res, new ApiError(500, "InternalError", `Internal error occurred: ${String(err)}`));
    });
  };

  private count(verb: string, r: ResourceRequest): void {
    const key = `${verb} ${r.type.plural}${r.subresource ? `/${r.subresource}` : ""}`;
    this.counters.set(key, (this.counters.get(key) ?? 0) + 1);
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://sandbox");
    const segments = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
    const method = req.method ?? "GET";

    if (segments[0] === "_sandbox") return this.admin(req, res, segments.slice(1), method);
    if (url.pathname.replace(/\/+$/, "") === "/apis/authentication.k8s.io/v1/tokenreviews")
      return this.tokenReview(req, res, method);

    const resource = parseResourcePath(segments);
    if (resource === "unknown")
      throw new ApiError(404, "NotFound", "the server could not find the requested resource");
    if (resource) return this.resource(req, res, resource, method, url.searchParams);

    if (method !== "GET")
      throw methodNotAllowed(`the server does not allow this method on the requested resource`);
    const path = url.pathname.replace(/\/+$/, "") || "/";
    if (path === "/healthz" || path === "/readyz" || path === "/livez") {
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end("ok");
      return;
    }
    if (path === "/version") return send(res, 200, serverVersion);
    if (path === "/api") return send(res, 200, coreVersions(this.serverAddress));
    if (path === "/apis") return send(res, 200, groupList());
    if (path === "/openapi/v2") {
      // An empty protobuf Document: kubectl's client-side validation then knows no
      // schemas and skips validation, instead of failing to download one.
      res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": 0 });
      res.end();
      return;
    }
    let doc: Record<string, unknown> | undefined;
    if (segments[0] === "api" && segments.length === 2) doc = resourceList("", segments[1]!);
    if (segments[0] === "apis" && segments.length === 2) doc = group(segments[1]!);
    if (segments[0] === "apis" && segments.length === 3) doc = resourceList(segments[1]!, segments[2]!);
    if (doc) return send(res, 200, doc);
    throw new ApiError(404, "NotFound", "the server could not find the requested resource");
  }

  private async resource(
    req: IncomingMessage,
    res: ServerResponse,
    r: ResourceRequest,
    method: string,
    query: URLSearchParams,
  ): Promise<void> {
    const verb = verbOf(method, r, query);
    if (verb === "unknown")
      throw methodNotAllowed(`the server does not allow this method on the requested resource`);
    this.count(verb, r);
    const resourceName = `${r.type.plural}${r.subresource ? `/${r.subresource}` : ""}`;
    const latency = this.faults.latencyFor(verb, resourceName);
    if (latency > 0) await new Promise((resolve) => setTimeout(resolve, latency));
    const injected = this.faults.failureFor(verb, resourceName, r.name ?? "");
    if (injected) {
      // Drain the body so the connection stays usable.
      if (verb !== "get" && verb !== "list" && verb !== "watch") await readBody(req).catch(() => undefined);
      throw injected;
    }

    const dryRun = query.getAll("dryRun").includes("All");
    const t = r.type;
    if (r.namespace === undefined && t.namespaced && verb !== "list" && verb !== "watch") {
      throw new ApiError(404, "NotFound", "the server could not find the requested resource");
    }
    if (r.subresource === "binding") {
      if (verb !== "create")
        throw methodNotAllowed("the server does not allow this method on the requested resource");
      requireJson(req);
      return send(res, 201, bindPod(this.registry, r.namespace!, r.name!, await readBody(req), dryRun));
    }
    switch (verb) {
      case "get": {
        const o = this.registry.peek(t, r.namespace, r.name!);
        if (wantsTable(req.headers.accept)) {
          return send(
            res,
            200,
            toTable(t, [o], { resourceVersion: o.metadata.resourceVersion }, includeObjectParam(query)),
          );
        }
        return sendObject(res, 200, t, o);
      }
      case "list": {
        const limit = Number(query.get("limit") ?? "0");
        const result = this.registry.list(t, r.namespace, {
          labelSelector: query.get("labelSelector") ?? undefined,
          fieldSelector: query.get("fieldSelector") ?? undefined,
          limit: Number.isFinite(limit) ? limit : 0,
          continueToken: query.get("continue") ?? undefined,
          shared: true,
        });
        if (wantsTable(req.headers.accept)) {
          return send(res, 200, toTable(t, result.items, listMeta(result), includeObjectParam(query)));
        }
        return sendText(res, 200, listJson(t, result));
      }
      case "watch":
        return this.watch(req, res, r, query);
      case "create": {
        requireJson(req);
        const body = await readBody(req);
        // Webhooks only when some configuration exists: otherwise the write stays synchronous.
        if (!this.writes.active(t))
          return sendObject(res, 201, t, this.registry.create(t, r.namespace, body, { dryRun }));
        const ctx = this.admissionContext(req);
        const created = await this.writes.create(t, r.namespace, body, { dryRun }, ctx);
        return sendObject(res, 201, t, created, warningHeaders(ctx.warnings));
      }
      case "update": {
        requireJson(req);
        const body = await readBody(req);
        const options = { dryRun, subresource: r.subresource };
        if (!this.writes.active(t))
          return sendObject(res, 200, t, this.registry.update(t, r.namespace, r.name!, body, options));
        const ctx = this.admissionContext(req);
        const updated = await this.writes.update(
          t,
          r.namespace,
          r.name!,
          () => this.registry.decodeUpdate(t, r.namespace, r.name!, body),
          options,
          ctx,
        );
        return sendObject(res, 200, t, updated, warningHeaders(ctx.warnings));
      }
      case "patch": {
        const contentType = req.headers["content-type"] ?? "";
        try {
          this.registry.checkPatchType(t, contentType);
        } catch (e) {
          await readBody(req).catch(() => undefined);
          throw e;
        }
        const body = await readBody(req);
        const options = { dryRun, subresource: r.subresource };
        if (!this.writes.active(t))
          return sendObject(
            res,
            200,
            t,
            this.registry.patch(t, r.namespace, r.name!, contentType, body, options),
          );
        const ctx = this.admissionContext(req);
        const patched = await this.writes.update(
          t,
          r.namespace,
          r.name!,
          (old) => this.registry.applyPatchTo(t, old, contentType, body),
          options,
          ctx,
        );
        return sendObject(res, 200, t, patched, warningHeaders(ctx.warnings));
      }
      case "delete": {
        if (r.subresource)
          throw methodNotAllowed("the server does not allow this method on the requested resource");
        const body = (await readBody(req)) as
          | { preconditions?: { uid?: string; resourceVersion?: string }; gracePeriodSeconds?: unknown }
          | undefined;
        const preconditions = body && typeof body === "object" ? body.preconditions : undefined;
        const gracePeriodSeconds = gracePeriodOf(body, query);
        const options = { dryRun, preconditions, gracePeriodSeconds };
        if (!this.writes.active(t))
          return sendObject(res, 200, t, this.registry.delete(t, r.namespace, r.name!, options));
        const ctx = this.admissionContext(req);
        const deleted = await this.writes.delete(t, r.namespace, r.name!, options, ctx);
        return sendObject(res, 200, t, deleted, warningHeaders(ctx.warnings));
      }
      case "deletecollection": {
        await readBody(req);
        const result = this.registry.list(t, r.namespace, {
          labelSelector: query.get("labelSelector") ?? undefined,
          fieldSelector: query.get("fieldSelector") ?? undefined,
        });
        const ctx = this.admissionContext(req);
        for (const o of result.items) {
          const name = o.metadata.name ?? "";
          // Each item is a DELETE to admission, as upstream; the first refusal ends the collection delete.
          if (this.writes.active(t)) await this.writes.delete(t, o.metadata.namespace, name, { dryRun }, ctx);
          else this.registry.delete(t, o.metadata.namespace, name, { dryRun });
        }
        return sendText(
          res,
          200,
          listJson(t, { ...result, resourceVersion: this.store.currentRevision.toString() }),
          warningHeaders(ctx.warnings),
        );
      }
    }
  }

  /** The requester (a token registered with PUT /_sandbox/tokens, else the sandbox admin) and a warnings sink. */
  private admissionContext(req: IncomingMessage): AdmissionContext {
    const user = this.tokens.userOfHeader(req.headers.authorization);
    const userInfo: UserInfo = user
      ? { username: user.username, ...(user.uid ? { uid: user.uid } : {}), groups: user.groups }
      : sandboxAdmin;
    return { userInfo, warnings: [] };
  }

  /** POST /apis/authentication.k8s.io/v1/tokenreviews: who a registered bearer token belongs to. */
  private async tokenReview(req: IncomingMessage, res: ServerResponse, method: string): Promise<void> {
    if (method !== "POST")
      throw methodNotAllowed("the server does not allow this method on the requested resource");
    requireJson(req);
    const key = "create tokenreviews";
    this.counters.set(key, (this.counters.get(key) ?? 0) + 1);
    return send(res, 201, this.tokens.review(await readBody(req)));
  }

  private watch(req: IncomingMessage, res: ServerResponse, r: ResourceRequest, query: URLSearchParams): void {
    const t = r.type;
    const filter = this.registry.filter(
      t,
      query.get("labelSelector") ?? undefined,
      query.get("fieldSelector") ?? undefined,
    );
    if (r.name) {
      // /watch/<plural>/<name> is the legacy spelling of fieldSelector=metadata.name=<name>.
      const byName = this.registry.filter(t, undefined, `metadata.name=${r.name}`);
      const base = filter;
      Object.assign(filter, { matches: (o: KubeObject) => base.matches(o) && byName.matches(o) });
    }
    const rvParam = query.get("resourceVersion") ?? "";
    if (rvParam !== "" && !/^\d+$/.test(rvParam))
      throw badRequest(`resourceVersion: Invalid value: "${rvParam}": must be an integer`);
    const table = wantsTable(req.headers.accept);
    const includeObject = includeObjectParam(query);
    const inScope = (o: KubeObject | undefined): boolean =>
      o !== undefined &&
      (r.namespace === undefined || o.metadata.namespace === r.namespace) &&
      filter.matches(o);

    res.writeHead(200, {
      "Content-Type": "application/json",
      "Transfer-Encoding": "chunked",
      "Cache-Control": "no-cache",
    });
    // Headers go out now, as kube-apiserver sends them: a quiet watch is still a started watch.
    res.flushHeaders();
    this.watches.set(res, () => res.end());
    const write = (type: string, object: unknown): void => {
      const payload =
        table && type !== "ERROR" && type !== "BOOKMARK"
          ? toTable(t, [object as KubeObject], {}, includeObject)
          : object;
      const encoded = payload === object && type !== "ERROR" ? goJson(t, object) : JSON.stringify(payload);
      res.write(`{"type":${JSON.stringify(type)},"object":${encoded}}\n`);
    };
    const deliver = (c: StoredChange): void => {
      if (c.resource !== t) return;
      const now = inScope(c.object);
      const before = inScope(c.previous);
      if (c.type === "ADDED") {
        if (now) write("ADDED", c.object);
      } else if (c.type === "DELETED") {
        if (now || before) write("DELETED", c.object);
      } else if (now && before) write("MODIFIED", c.object);
      else if (now) write("ADDED", c.object);
      else if (before) write("DELETED", c.object);
    };

    // Everything below runs synchronously, so no change can slip between the
    // replay and the subscription.
    if (rvParam === "" || rvParam === "0") {
      for (const o of this.store.peekAll(t, r.namespace)) if (filter.matches(o)) write("ADDED", o);
    } else {
      try {
        for (const c of this.store.changesSince(BigInt(rvParam))) deliver(c);
      } catch (e) {
        if (!(e instanceof TooOldResourceVersionError)) throw e;
        write("ERROR", gone(e.message).toStatus());
        this.watches.delete(res);
        res.end();
        return;
      }
    }
    const unsubscribe = this.store.subscribe(deliver);
    let bookmarkTimer: NodeJS.Timeout | undefined;
    if (query.get("allowWatchBookmarks") === "true") {
      bookmarkTimer = setInterval(() => {
        write("BOOKMARK", {
          kind: t.kind,
          apiVersion: apiVersionOf(t),
          metadata: { resourceVersion: this.store.currentRevision.toString() },
        });
      }, 5_000);
      bookmarkTimer.unref();
    }
    const timeout = Number(query.get("timeoutSeconds") ?? "0");
    const timer = timeout > 0 ? setTimeout(() => res.end(), timeout * 1000) : undefined;
    timer?.unref();
    const stop = (): void => {
      unsubscribe();
      if (timer) clearTimeout(timer);
      if (bookmarkTimer) clearInterval(bookmarkTimer);
      this.watches.delete(res);
    };
    this.watches.set(res, () => {
      stop();
      res.end();
    });
    res.on("close", stop);
    req.on("close", stop);
  }

  private async admin(
    req: IncomingMessage,
    res: ServerResponse,
    path: string[],
    method: string,
  ): Promise<void> {
    const what = path.join("/");
    if (what === "seed" && method === "POST") {
      const body = await readBody(req);
      const objects = Array.isArray(body) ? body : (body as { objects?: unknown } | undefined)?.objects;
      if (!Array.isArray(objects)) throw badRequest("seed takes an array of objects or {objects: [...]}");
      const seeded = objects.map((o) => this.registry.seed(o));
      return send(res, 200, { seeded: seeded.length, objects: seeded });
    }
    if (what === "counters" && method === "GET") return send(res, 200, Object.fromEntries(this.counters));
    if (what === "counters" && method === "DELETE") {
      this.counters.clear();
      return send(res, 200, {});
    }
    if (what === "faults" && method === "GET") return send(res, 200, this.faults.current);
    if (what === "faults" && method === "PUT") {
      try {
        this.faults.set(parseFaultSettings(await readBody(req)));
      } catch (e) {
        if (e instanceof ApiError) throw e;
        throw badRequest(e instanceof Error ? e.message : String(e));
      }
      return send(res, 200, this.faults.current);
    }
    if (what === "faults" && method === "DELETE") {
      this.faults.clear();
      return send(res, 200, {});
    }
    if (what === "services" && method === "GET") return send(res, 200, this.services.toJSON());
    if (what === "services" && method === "PUT") {
      this.services.set(await readBody(req));
      return send(res, 200, this.services.toJSON());
    }
    if (what === "services" && method === "DELETE") {
      this.services.clear();
      return send(res, 200, {});
    }
    if (what === "tokens" && method === "GET") return send(res, 200, { usernames: this.tokens.usernames() });
    if (what === "tokens" && method === "PUT") {
      this.tokens.set(await readBody(req));
      return send(res, 200, { usernames: this.tokens.usernames() });
    }
    if (what === "tokens" && method === "DELETE") {
      this.tokens.clear();
      return send(res, 200, {});
    }
    if (what === "admission" && method === "GET")
      return send(res, 200, { ignoredFailures: this.admission.ignoredFailures });
    if (what === "reset" && method === "POST") {
      this.reset();
      return send(res, 200, {});
    }
    if (what === "compact" && method === "POST") {
      this.store.compact();
      return send(res, 200, { compactedThrough: this.store.currentRevision.toString() });
    }
    throw new ApiError(404, "NotFound", `no sandbox hook ${method} /_sandbox/${what}`);
  }
}

export async function startApiServer(options: ApiServerOptions = {}): Promise<ApiServerHandle> {
  const api = new SandboxApiServer(options);
  const server = createServer(api.handle);
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve());
  });
  const address = server.address() as AddressInfo;
  const hostPort = `${address.address}:${address.port}`;
  api.setServerAddress(hostPort);
  return {
    url: `http://${hostPort}`,
    server,
    registry: api.registry,
    store: api.store,
    faults: api.faults,
    counters: api.counters,
    services: api.services,
    tokens: api.tokens,
    setBaseline: (objects) => api.setBaseline(objects),
    close: () =>
      new Promise<void>((resolve) => {
        api.reset();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
