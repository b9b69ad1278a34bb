// Fuzzing every function over real HTTP: the four controller functions
// (binder, provisioner, attacher, attach-detach, built in-process as their
// function tests build them) and the admission function, all against one
// sandbox whose cluster is settled (a claim provisioned, Bound and attached
// to a running pod). Requests are random: any body, any headers (every
// content type the envelope parser knows, ce-* headers with random values,
// junk), and well-formed CloudEvents (binary, structured, batched),
// PingSource events, watch events and AdmissionReviews with random values of
// random types put into random fields of real objects. Properties, per
// function:
//   - never a 5xx: a 500 drops the event and a 503 asks for it again, and
//     neither is right for input that cannot get better;
//   - never a crash: every answer is a JSON body (or 204/empty for OPTIONS),
//     no uncaught exception or unhandled rejection happens, and /healthz
//     still answers 200 afterwards;
//   - never a write: the sandbox's counters show no create/update/patch/delete
//     and the CSI driver no mutating call. The cluster is settled, so even a
//     well-formed event must find nothing to do: a write here means a handler
//     trusted a field of the (hostile) event over the API's truth, or a
//     decision that is not idempotent on settled state.
// Mutation notes (the bug each check catches; the first two were tried on a
// copy of the code and caught with the default seed):
//   - no 5xx: a handler using a field of the event's object without a type
//     check, e.g. the binder's volumeDeleted calling claimRef.namespace.trim()
//     unchecked (TypeError -> 500); an API 400/422 for a hostile name
//     escaping as a 500; an EnvelopeError thrown as a plain Error;
//   - no writes: a decision that is not idempotent on settled state, e.g. the
//     CSI attach handler ignoring status.attached (ControllerPublishVolume on
//     every VolumeAttachment event), or a handler acting on the event's copy
//     (a DELETED claim's spec.volumeName) instead of what it reads;
//   - healthz / no uncaught errors: a throw inside a stream callback or an
//     un-awaited promise (an event write fired and forgotten).
// Runs are deterministic (seed below; FUZZ_SEED / FUZZ_RUNS override; FUZZ_DEBUG=1 logs).
import assert from "node:assert/strict";
import {
  Agent,
  request as httpRequest,
  type Server,
  validateHeaderName,
  validateHeaderValue,
} from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { createAdmissionApp } from "../../functions/admission/app.ts";
import { createAttachDetachApp } from "../../functions/attach-detach/app.ts";
import { createAttacherApp } from "../../functions/attacher/app.ts";
import { createBinderApp } from "../../functions/binder/app.ts";
import { createProvisionerApp } from "../../functions/provisioner/app.ts";
import { createClusterLookups } from "../../shared/admission/cluster-lookups.ts";
import { defaultAdmissionConfig } from "../../shared/admission/config.ts";
import { createAdmissionHooks } from "../../shared/admission/hooks.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  volumeAttachments,
} from "../../shared/kube/resources.ts";
import type { KubeObject, PersistentVolumeClaim, VolumeAttachment } from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { driverName, type StorageSystem, startStorageSystem } from "../helpers/storage-system.ts";

const SEED = Number(process.env.FUZZ_SEED ?? 20260801);
/** Requests per function; the whole file stays well under 30 s on 2 cores. */
const RUNS = Number(process.env.FUZZ_RUNS ?? 300);
const API_SERVER = "https://10.96.0.1:443";
const NODE = "sandbox-node";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

interface Target {
  name: string;
  app: FunctionApp;
  server?: Server;
  url?: string;
}

let sandbox: TestSandbox;
let system: StorageSystem;
let admissionKube: KubeJsonClient;
const targets: Target[] = [];
/** The settled objects, as the API returns them: templates for well-formed events. */
const templates: { kind: string; apiVersion: string; object: JsonObject }[] = [];
const uncaught: unknown[] = [];
const onUncaught = (err: unknown): void => void uncaught.push(err);
// A fresh connection per request: a reused socket the server closed would look like a hang-up.
const agent = new Agent({ keepAlive: false });

async function listen(target: Target): Promise<void> {
  const server = target.app.listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  target.server = server;
  target.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function objectWrites(counters: Record<string, number>): string[] {
  return Object.entries(counters)
    .filter(([k, n]) => n > 0 && /^(create|update|patch|delete|deletecollection) /.test(k))
    .map(([k, n]) => `${k}: ${n}`);
}

const mutatingCsi = [
  "CreateVolume",
  "DeleteVolume",
  "ControllerPublishVolume",
  "ControllerUnpublishVolume",
  "CreateSnapshot",
  "DeleteSnapshot",
  "ControllerExpandVolume",
] as const;

before(async () => {
  process.on("uncaughtException", onUncaught);
  process.on("unhandledRejection", onUncaught);
  sandbox = await startTestSandbox();
  system = await startStorageSystem(sandbox);
  await sandbox.admin.seed([
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "fast", annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
      provisioner: driverName,
      reclaimPolicy: "Delete",
      volumeBindingMode: "Immediate",
      allowVolumeExpansion: true,
    },
    {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "data", namespace: "default" },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        storageClassName: "fast",
      },
    },
    {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "app", namespace: "default" },
      spec: { nodeName: NODE, volumes: [{ name: "d", persistentVolumeClaim: { claimName: "data" } }] },
      status: { phase: "Running" },
    },
    // A static volume nobody claims: Available, another driver's.
    {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "static" },
      spec: {
        capacity: { storage: "5Gi" },
        accessModes: ["ReadWriteMany"],
        persistentVolumeReclaimPolicy: "Retain",
        storageClassName: "",
        csi: { driver: "other.csi.example.com", volumeHandle: "static-1" },
      },
    },
  ]);
  await system.settle();
  // Settled means: a full resync of every controller writes nothing.
  await sandbox.admin.resetCounters();
  await system.binder.resync();
  await system.provisioner.resync();
  await system.attachDetach.resync();
  await system.attacher.resync();
  assert.deepEqual(objectWrites(await sandbox.admin.counters()), [], "the seeded cluster is not settled");

  const claim = await system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "data", "default");
  assert.equal(claim.status?.phase, "Bound");
  const [pvList, vaList, podList, nodeList] = await Promise.all([
    system.kube.list<KubeObject>(persistentVolumes),
    system.kube.list<VolumeAttachment>(volumeAttachments),
    system.kube.list<KubeObject>(pods),
    system.kube.list<KubeObject>(nodes),
  ]);
  assert.equal(vaList.items[0]?.status?.attached, true, "the pod's volume is attached");
  const add = (kind: string, apiVersion: string, o: KubeObject): void => {
    templates.push({ kind, apiVersion, object: JSON.parse(JSON.stringify(o)) as JsonObject });
  };
  add("PersistentVolumeClaim", "v1", claim);
  for (const o of pvList.items) add("PersistentVolume", "v1", o);
  for (const o of vaList.items) add("VolumeAttachment", "storage.k8s.io/v1", o);
  for (const o of podList.items) add("Pod", "v1", o);
  for (const o of nodeList.items) add("Node", "v1", o);

  // FUZZ_DEBUG=1: error logs (with the stack of any 500) and a tally of answers per function.
  const quiet = (name: string) => createLogger({ name, level: process.env.FUZZ_DEBUG ? "error" : "silent" });
  const metrics = () => createMetricsRegistry({ defaultMetrics: false });
  targets.push(
    {
      name: "binder",
      app: createBinderApp({ controller: system.binder, logger: quiet("binder"), metrics: metrics() }),
    },
    {
      name: "provisioner",
      app: createProvisionerApp({
        controller: system.provisioner,
        csi: system.csi,
        logger: quiet("provisioner"),
        metrics: metrics(),
      }),
    },
    {
      name: "attacher",
      app: createAttacherApp({
        controller: system.attacher,
        csi: system.csi,
        logger: quiet("attacher"),
        metrics: metrics(),
      }),
    },
    {
      name: "attach-detach",
      app: createAttachDetachApp({
        controller: system.attachDetach,
        logger: quiet("attach-detach"),
        metrics: metrics(),
      }),
    },
  );
  const config = { ...defaultAdmissionConfig(), provisionerDrivers: new Set([driverName]) };
  admissionKube = new KubeJsonClient(sandbox.kubeConfig, { requestTimeoutMs: config.lookupTimeoutMs });
  targets.push({
    name: "admission",
    app: createAdmissionApp({
      hooks: createAdmissionHooks({
        lookups: createClusterLookups(admissionKube, {
          timeoutMs: config.lookupTimeoutMs,
          cacheTtlMs: config.cacheTtlMs,
          cacheMaxEntries: config.cacheMaxEntries,
        }),
        config,
      }),
      logger: quiet("admission"),
      metrics: metrics(),
      maxBodyBytes: 64 * 1024,
    }),
  });
  for (const t of targets) await listen(t);
});

after(async () => {
  for (const t of targets)
    if (t.server) await new Promise<void>((resolve) => t.server?.close(() => resolve()));
  agent.destroy();
  await admissionKube?.close();
  await system?.close();
  await sandbox?.close();
  process.off("uncaughtException", onUncaught);
  process.off("unhandledRejection", onUncaught);
});

// ---- random values ----------------------------------------------------------

/** Values that break code which trusts a field's type or shape. */
const hostile = fc.constantFrom<Json>(
  null,
  "",
  0,
  -1,
  1e308,
  true,
  [],
  {},
  [null],
  "x".repeat(5000),
  "__proto__",
  "constructor",
  "../..",
  "a/b",
  "%2F",
  "a?b=c",
  "a#b",
  " ",
  "\u0000",
  "日本",
  NODE,
  "data",
  "default",
  driverName,
  "2026-01-01T00:00:00Z",
  "not-a-date",
  "1Gi",
  "-1Gi",
);
const anyJson: fc.Arbitrary<Json> = fc.oneof(
  { weight: 3, arbitrary: hostile },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 2 }).map((v) => v as Json) },
);

type Path = (string | number)[];

/** Every path into a JSON value (the root too). */
function pathsOf(value: Json, prefix: Path = [], out: Path[] = []): Path[] {
  out.push(prefix);
  if (Array.isArray(value)) for (const [i, v] of value.entries()) pathsOf(v, [...prefix, i], out);
  else if (value !== null && typeof value === "object")
    for (const [k, v] of Object.entries(value)) pathsOf(v, [...prefix, k], out);
  return out;
}

/** A copy with `path` replaced by `replacement` (undefined deletes it); "__proto__" stays an own key. */
function setAt(value: Json | undefined, path: Path, replacement: Json | undefined): Json | undefined {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path;
  if (typeof head === "number") {
    const copy = Array.isArray(value) ? [...value] : [];
    const next = setAt(copy[head], rest, replacement);
    if (next === undefined) copy.splice(head, 1);
    else copy[head] = next;
    return copy;
  }
  // A missing (or non-object) parent becomes an object, so fields the template lacks can be added.
  const parent: JsonObject =
    value !== null && typeof value === "object" && !Array.isArray(value) ? value : {};
  const copy: JsonObject = {};
  const own = (k: string, v: Json) =>
    Object.defineProperty(copy, k, { value: v, enumerable: true, writable: true, configurable: true });
  for (const [k, v] of Object.entries(parent)) own(k, v);
  const next = setAt(Object.hasOwn(parent, head ?? "") ? parent[head ?? ""] : undefined, rest, replacement);
  if (next === undefined) delete copy[head ?? ""];
  else own(head ?? "", next);
  return copy;
}

/** Fields the controllers read from events or objects, per kind; edits favour them (added when missing). */
const META: Path[] = [
  ["metadata", "deletionTimestamp"],
  ["metadata", "finalizers"],
  ["metadata", "finalizers", 0],
  ["metadata", "annotations"],
  ["metadata", "uid"],
];
const READ_PATHS: Record<string, Path[]> = {
  PersistentVolume: [
    ...META,
    ["spec", "claimRef"],
    ["spec", "claimRef", "name"],
    ["spec", "claimRef", "namespace"],
    ["spec", "claimRef", "uid"],
    ["spec", "csi"],
    ["spec", "csi", "driver"],
    ["spec", "persistentVolumeReclaimPolicy"],
    ["status", "phase"],
  ],
  PersistentVolumeClaim: [
    ...META,
    ["spec", "volumeName"],
    ["spec", "storageClassName"],
    ["spec", "resources", "requests", "storage"],
    ["status", "phase"],
  ],
  Pod: [
    ...META,
    ["spec", "nodeName"],
    ["spec", "volumes"],
    ["spec", "volumes", 0, "persistentVolumeClaim", "claimName"],
    ["spec", "volumes", 0, "ephemeral"],
    ["status", "phase"],
  ],
  VolumeAttachment: [
    ...META,
    ["spec", "attacher"],
    ["spec", "nodeName"],
    ["spec", "source"],
    ["spec", "source", "persistentVolumeName"],
    ["spec", "source", "inlineVolumeSpec"],
    ["status", "attached"],
  ],
  Node: [...META, ["spec", "taints"], ["status", "volumesInUse"], ["status", "conditions"]],
};

/**
 * Up to three fields given random values of random types (or removed): half
 * the time a field the controllers read, otherwise any field of the template.
 * `where` limits both.
 */
function fuzzedFields(
  template: Json,
  where: (path: Path) => boolean = () => true,
  prefix: Path = [],
): fc.Arbitrary<Json> {
  const paths = pathsOf(template).filter((p) => p.length > 0 && where(p));
  let object: Json | undefined = template;
  for (const key of prefix)
    object =
      object !== null && typeof object === "object" && !Array.isArray(object) ? object[key] : undefined;
  const kind =
    object !== null && typeof object === "object" && !Array.isArray(object) ? object.kind : undefined;
  const read = (READ_PATHS[String(kind)] ?? META).map((p) => [...prefix, ...p]).filter(where);
  const edit = fc.tuple(fc.boolean(), fc.nat(), fc.option(anyJson, { nil: undefined, freq: 4 }));
  return fc.array(edit, { maxLength: 3 }).map((edits) => {
    let out: Json = template;
    for (const [favour, i, replacement] of edits) {
      const from = favour && read.length > 0 ? read : paths;
      const path = from[i % from.length];
      if (path !== undefined) out = setAt(out, path, replacement) ?? null;
    }
    return out;
  });
}

/** Mostly the valid value, sometimes a random one. */
function mostly<T extends Json>(valid: T): fc.Arbitrary<Json> {
  return fc.oneof({ weight: 12, arbitrary: fc.constant<Json>(valid) }, anyJson);
}

const CE_TYPES = [
  "dev.knative.apiserver.resource.add",
  "dev.knative.apiserver.resource.update",
  "dev.knative.apiserver.resource.delete",
  "dev.knative.apiserver.ref.add",
  "dev.knative.apiserver.ref.update",
  "dev.knative.apiserver.ref.delete",
  "dev.knative.sources.ping",
  "dev.knative.apiserver.resource.patch",
  "com.example.unknown",
];
const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "Application/JSON",
  "application/cloudevents+json",
  "application/cloudevents+json; charset=utf-8",
  "application/cloudevents-batch+json",
  "application/cloudevents+xml",
  "application/merge-patch+json",
  "text/plain",
  "multipart/form-data; boundary=x",
  "application/octet-stream",
  "",
  ";",
  "application/",
  "x".repeat(300),
];

/** Printable Latin-1 text: what an HTTP header may carry. */
const headerText = fc.string({
  unit: fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) },
    fc.integer({ min: 0xa0, max: 0xff }).map((c) => String.fromCharCode(c)),
  ),
  maxLength: 40,
});
const headerValue = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      "1.0",
      "0.3",
      "",
      API_SERVER,
      ...CE_TYPES,
      ...CONTENT_TYPES,
      "PersistentVolumeClaim",
      "VolumeAttachment",
      "v1",
      "storage.k8s.io/v1",
      NODE,
    ),
  },
  headerText,
);
// Transport headers are Node's business, not ours (a random Content-Length would only hang the socket).
const TRANSPORT = new Set(["content-length", "transfer-encoding", "host", "connection", "expect", "upgrade"]);
const headerName = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      "content-type",
      "Content-Type",
      "ce-specversion",
      "ce-id",
      "CE-ID",
      "ce-type",
      "ce-source",
      "ce-subject",
      "ce-time",
      "ce-kind",
      "ce-name",
      "ce-namespace",
      "ce-apiversion",
      "ce-datacontenttype",
      "ce-__proto__",
      "ce-",
      "__proto__",
      "constructor",
      "x-request-id",
      "authorization",
      "accept",
      "content-encoding",
      "traceparent",
    ),
  },
  fc.string({ minLength: 1, maxLength: 12 }).map((s) => (s.startsWith("ce") ? s : `ce-${s}`)),
  fc.string({ minLength: 1, maxLength: 12 }),
);
const randomHeaders = fc.array(
  fc.tuple(
    headerName,
    fc.oneof({ weight: 5, arbitrary: headerValue }, fc.array(headerValue, { maxLength: 3 })),
  ),
  { maxLength: 6 },
);

type HeaderPairs = [string, string | string[]][];

interface FuzzRequest {
  method: string;
  path: string;
  headers: HeaderPairs;
  body: Buffer;
}

const json = (v: Json | undefined): Buffer => Buffer.from(JSON.stringify(v) ?? "");

/** Mostly `base`; sometimes with random headers added or replacing some. */
function withNoise(base: HeaderPairs, noisy: boolean): fc.Arbitrary<HeaderPairs> {
  if (!noisy) return fc.constant(base);
  return fc.tuple(fc.nat(2), randomHeaders).map(([how, extra]) => {
    if (how === 0) return base;
    return [...base.filter(([k]) => !extra.some(([e]) => e.toLowerCase() === k.toLowerCase())), ...extra];
  });
}

/** The JSON text of the value; when noisy, sometimes cut short or with a "__proto__" key smuggled in. */
function bodyOf(value: fc.Arbitrary<Json | undefined>, noisy: boolean): fc.Arbitrary<Buffer> {
  if (!noisy) return value.map(json);
  return fc.tuple(value, fc.nat(3), fc.nat()).map(([v, how, cut]) => {
    const bytes = json(v);
    if (how === 0) return bytes.subarray(0, cut % (bytes.length + 1));
    // JSON.parse makes "__proto__" an own property: the parser must refuse it, not let it through.
    if (how === 1)
      return Buffer.from(bytes.toString().replace(/"(name|kind|spec|type|metadata)":/, '"__proto__":'));
    return bytes;
  });
}

interface Picked {
  /** Renamed to an object that does not exist: DELETE handlers then have only the event's copy. */
  gone: boolean;
  kind: string;
  apiVersion: string;
  name: string;
  namespace: string;
  object: Json;
}

/** Paths whose values the envelope parser checks (identity of the object): noisy events fuzz them too. */
function isIdentity(path: Path): boolean {
  const [a, b] = path;
  return (
    a === "kind" ||
    a === "apiVersion" ||
    (a === "metadata" && (b === undefined || b === "name" || b === "namespace"))
  );
}

/**
 * One of the settled objects (sometimes renamed to one that is gone, or
 * relabelled as a kind nobody handles). Well-formed: random values in
 * random fields of spec, status and metadata, the identity intact. Noisy:
 * any field, the identity too.
 */
function eventObject(noisy: boolean): fc.Arbitrary<Picked> {
  return fc
    .tuple(fc.nat(), fc.nat(9), fc.constantFrom("Secret", "StorageClass", "CSINode", "Deployment"))
    .chain(([i, how, otherKind]) => {
      const t = templates[i % templates.length]!;
      const meta = t.object.metadata as JsonObject;
      const kind = how === 0 ? otherKind : t.kind;
      // Deleted objects matter: handlers of DELETE events look at the event's copy only when the object is gone.
      const gone = how >= 6;
      const name = gone ? `gone-${i % 7}` : String(meta.name);
      const object: JsonObject = { ...t.object, kind, metadata: { ...meta, name } };
      const namespace = typeof meta.namespace === "string" ? meta.namespace : "";
      return fuzzedFields(object, noisy ? () => true : (p) => !isIdentity(p)).map(
        (fuzzed): Picked => ({ gone, kind, apiVersion: t.apiVersion, name, namespace, object: fuzzed }),
      );
    });
}

/** add, update or delete; mostly delete for objects that are gone (what a DELETED event is about). */
function actionFor(picked: Picked): fc.Arbitrary<"add" | "update" | "delete"> {
  return picked.gone
    ? fc.oneof({ weight: 4, arbitrary: fc.constant("delete" as const) }, fc.constantFrom("add", "update"))
    : fc.constantFrom("add", "update", "delete");
}

function binaryEvent(noisy: boolean): fc.Arbitrary<[HeaderPairs, Buffer]> {
  return eventObject(noisy)
    .chain((picked) =>
      fc.record({
        picked: fc.constant(picked),
        action: actionFor(picked),
        reference: fc.boolean(),
        contentType: noisy
          ? fc.constantFrom(...CONTENT_TYPES)
          : fc.constantFrom("application/json", "application/json; charset=utf-8"),
        type: fc.constantFrom(...CE_TYPES),
      }),
    )
    .chain(({ picked, action, reference, contentType, type }) => {
      const { kind, apiVersion, name, namespace } = picked;
      const headers: HeaderPairs = [
        ["content-type", contentType],
        ["ce-specversion", "1.0"],
        ["ce-id", "8a7f0c52-3e9b-4d61-a0f2-6c1d9e4b7a35"],
        ["ce-source", API_SERVER],
        ["ce-type", noisy ? type : `dev.knative.apiserver.${reference ? "ref" : "resource"}.${action}`],
        ["ce-subject", `/apis/${apiVersion}/namespaces/${namespace}/x/${name}`],
        ["ce-kind", kind],
        ["ce-apiversion", apiVersion],
        ["ce-name", name],
        ...(namespace ? ([["ce-namespace", namespace]] as HeaderPairs) : []),
      ];
      const data: Json = reference
        ? { apiVersion, kind, name, ...(namespace ? { namespace } : {}) }
        : picked.object;
      return fc.tuple(
        withNoise(headers, noisy),
        bodyOf(noisy ? fuzzedFields(data, () => true) : fc.constant(data), noisy),
      );
    });
}

function structured(picked: Picked, noisy: boolean): fc.Arbitrary<Json> {
  const valid = <T extends Json>(v: T): fc.Arbitrary<Json> => (noisy ? mostly(v) : fc.constant(v));
  return fc
    .record({
      specversion: valid("1.0"),
      id: valid("0b7c1d22"),
      source: valid(API_SERVER),
      type: noisy
        ? fc.oneof({ weight: 4, arbitrary: fc.constantFrom<Json>(...CE_TYPES) }, anyJson)
        : actionFor(picked).map((a): Json => `dev.knative.apiserver.resource.${a}`),
      datacontenttype: valid("application/json"),
      kind: valid(picked.kind),
      apiversion: valid(picked.apiVersion),
      data: noisy
        ? fc.oneof({ weight: 8, arbitrary: fc.constant(picked.object) }, anyJson)
        : fc.constant(picked.object),
      data_base64: noisy
        ? fc.oneof(
            { weight: 12, arbitrary: fc.constant(undefined) },
            fc.constantFrom<Json>("e30=", "!!", 5, ""),
          )
        : fc.constant(undefined),
    })
    .map((e) => JSON.parse(JSON.stringify(e)) as Json);
}

function structuredEvent(noisy: boolean): fc.Arbitrary<[HeaderPairs, Buffer]> {
  return eventObject(noisy).chain((picked) =>
    fc.tuple(
      withNoise([["content-type", "application/cloudevents+json; charset=utf-8"]], noisy),
      bodyOf(structured(picked, noisy), noisy),
    ),
  );
}

function batchEvent(noisy: boolean): fc.Arbitrary<[HeaderPairs, Buffer]> {
  return fc
    .array(eventObject(noisy), { maxLength: 3 })
    .chain((items) =>
      fc.tuple(
        withNoise([["content-type", "application/cloudevents-batch+json"]], noisy),
        bodyOf(
          items.length === 0 ? fc.constant<Json>([]) : fc.tuple(...items.map((p) => structured(p, noisy))),
          noisy,
        ),
      ),
    );
}

function watchEvent(noisy: boolean): fc.Arbitrary<[HeaderPairs, Buffer]> {
  return eventObject(noisy).chain((picked) =>
    fc.tuple(
      withNoise([["content-type", "application/json"]], noisy),
      bodyOf(
        fc.record({
          type: noisy
            ? fc.oneof(
                {
                  weight: 6,
                  arbitrary: fc.constantFrom<Json>("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"),
                },
                anyJson,
              )
            : actionFor(picked).map(
                (a): Json => ({ add: "ADDED", update: "MODIFIED", delete: "DELETED" })[a],
              ),
          object: noisy
            ? fc.oneof({ weight: 8, arbitrary: fc.constant(picked.object) }, anyJson)
            : fc.constant(picked.object),
        }),
        noisy,
      ),
    ),
  );
}

const pingEvent = fc.tuple(
  withNoise(
    [
      ["content-type", "application/json"],
      ["ce-specversion", "1.0"],
      ["ce-id", "ping-1"],
      ["ce-source", "/apis/v1/namespaces/default/pingsources/resync"],
      ["ce-type", "dev.knative.sources.ping"],
    ],
    true,
  ),
  bodyOf(fc.oneof(fc.constant<Json>({}), anyJson), false),
);
const junk: fc.Arbitrary<[HeaderPairs, Buffer]> = fc.tuple(
  randomHeaders,
  fc.oneof(
    fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
    fc.string({ maxLength: 200 }).map((s) => Buffer.from(s)),
    bodyOf(
      fc.jsonValue({ maxDepth: 3 }).map((v) => v as Json),
      true,
    ),
    fc.constant(Buffer.alloc(0)),
  ),
);

/** Any envelope: about half well-formed (reaching the controller), the rest noisy or junk. */
function anyEnvelope(): fc.Arbitrary<[HeaderPairs, Buffer]> {
  return fc.oneof(
    { weight: 4, arbitrary: binaryEvent(false) },
    { weight: 3, arbitrary: structuredEvent(false) },
    { weight: 1, arbitrary: batchEvent(false) },
    { weight: 3, arbitrary: watchEvent(false) },
    { weight: 3, arbitrary: binaryEvent(true) },
    { weight: 2, arbitrary: structuredEvent(true) },
    { weight: 1, arbitrary: batchEvent(true) },
    { weight: 2, arbitrary: watchEvent(true) },
    { weight: 1, arbitrary: pingEvent },
    { weight: 3, arbitrary: junk },
  );
}

const PATHS = [
  "/",
  "/resync",
  "/healthz",
  "/readyz",
  "/metrics",
  "//",
  "/%",
  "/?x=1",
  "/mutate/persistentvolumeclaims",
  "/validate/persistentvolumeclaims",
  "/mutate/persistentvolumes",
  "/validate/volumeattachments",
  "/explain/namespaces/default/persistentvolumeclaims/data",
  "/explain/namespaces/Default/persistentvolumeclaims/..",
  "/explain/namespaces/%2e%2e/persistentvolumeclaims/%00",
];

function controllerRequest(): fc.Arbitrary<FuzzRequest> {
  const envelope = anyEnvelope();
  return fc
    .record({
      envelope,
      method: fc.oneof(
        { weight: 20, arbitrary: fc.constant("POST") },
        fc.constantFrom("GET", "PUT", "DELETE", "OPTIONS", "PATCH"),
      ),
      path: fc.oneof({ weight: 20, arbitrary: fc.constant("/") }, fc.constantFrom(...PATHS)),
    })
    .map(({ envelope: [headers, body], method, path }) => printable({ method, path, headers, body }));
}

const HOOKS = [
  {
    path: "/mutate/persistentvolumeclaims",
    resource: "persistentvolumeclaims",
    kind: "PersistentVolumeClaim",
    group: "",
  },
  {
    path: "/validate/persistentvolumeclaims",
    resource: "persistentvolumeclaims",
    kind: "PersistentVolumeClaim",
    group: "",
  },
  { path: "/mutate/persistentvolumes", resource: "persistentvolumes", kind: "PersistentVolume", group: "" },
  {
    path: "/validate/volumeattachments",
    resource: "volumeattachments",
    kind: "VolumeAttachment",
    group: "storage.k8s.io",
  },
] as const;

/**
 * AdmissionReviews for the hook's kind built from the settled objects.
 * Well-formed: random values in random fields of the objects under review.
 * Noisy: anywhere in the review, with random headers and cut bodies.
 * test/admission/property.test.ts covers the review fields in depth; this
 * adds the wire (headers, content types, CloudEvents sent to a webhook).
 */
function admissionRequest(): fc.Arbitrary<FuzzRequest> {
  const review = (noisy: boolean) =>
    fc
      .record({
        hook: fc.constantFrom(...HOOKS),
        operation: fc.constantFrom("CREATE", "UPDATE", "DELETE", "CONNECT"),
        dryRun: fc.boolean(),
        uid: fc.uuid(),
        i: fc.nat(),
      })
      .chain(({ hook, operation, dryRun, uid, i }) => {
        const sameKind = templates.filter((t) => t.kind === hook.kind);
        const t = sameKind[i % Math.max(1, sameKind.length)] ?? templates[0]!;
        const meta = t.object.metadata as JsonObject;
        const request: JsonObject = {
          uid,
          kind: { group: hook.group, version: "v1", kind: hook.kind },
          resource: { group: hook.group, version: "v1", resource: hook.resource },
          subResource: "",
          requestKind: { group: hook.group, version: "v1", kind: hook.kind },
          name: meta.name ?? "",
          ...(typeof meta.namespace === "string" ? { namespace: meta.namespace } : {}),
          operation,
          userInfo: { username: "system:admin", groups: ["system:masters"] },
          object: operation === "DELETE" ? null : t.object,
          oldObject: operation === "CREATE" ? null : t.object,
          dryRun,
          options: null,
        };
        const whole: Json = { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request };
        const inObjects = (p: Path) =>
          p[0] === "request" && (p[1] === "object" || p[1] === "oldObject") && p.length > 2;
        return fc.tuple(
          fc.constant(hook.path),
          withNoise([["content-type", "application/json"]], noisy),
          bodyOf(fuzzedFields(whole, noisy ? () => true : inObjects, ["request", "object"]), noisy),
        );
      });
  const envelope = fc.oneof(
    { weight: 6, arbitrary: review(false) },
    { weight: 3, arbitrary: review(true) },
    // CloudEvents and junk sent to a webhook path.
    {
      weight: 2,
      arbitrary: fc
        .tuple(fc.constantFrom(...HOOKS.map((h) => h.path)), anyEnvelope())
        .map(([path, [headers, body]]) => [path, headers, body] as const),
    },
  );
  return fc
    .record({
      envelope,
      method: fc.oneof(
        { weight: 20, arbitrary: fc.constant("POST") },
        fc.constantFrom("GET", "PUT", "OPTIONS"),
      ),
      path: fc.oneof({ weight: 12, arbitrary: fc.constant(undefined) }, fc.constantFrom(...PATHS)),
    })
    .map(({ envelope: [hookPath, headers, body], method, path }) =>
      printable({ method, path: path ?? hookPath, headers, body }),
    );
}

// ---- the wire ------------------------------------------------------------------

/** Drops header names/values Node itself refuses to send (they never reach a function). */
function sendable(headers: HeaderPairs): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
  for (const [name, value] of headers) {
    if (TRANSPORT.has(name.toLowerCase())) continue;
    try {
      validateHeaderName(name);
      for (const v of Array.isArray(value) ? value : [value]) validateHeaderValue(name, v);
    } catch {
      continue;
    }
    out[name] = value;
  }
  return out;
}

function send(url: string, r: FuzzRequest): Promise<{ status: number; type: string; text: string }> {
  return new Promise((resolve, reject) => {
    const body = r.method === "GET" || r.method === "OPTIONS" ? undefined : r.body;
    const headers = sendable(r.headers);
    // Node frames DELETE bodies only with a Content-Length; without it they would read as a second request.
    if (body !== undefined) headers["content-length"] = String(body.length);
    const req = httpRequest(
      `${url}${r.path}`,
      { method: r.method, headers, agent, timeout: 10_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            type: String(res.headers["content-type"] ?? ""),
            text: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer within 10 s to ${r.method} ${r.path}`)));
    req.on("error", reject);
    req.end(body);
  });
}

/** Counterexamples print as text, not as a Buffer's bytes. */
function printable(r: FuzzRequest): FuzzRequest {
  return Object.defineProperty(r, fc.toStringMethod, { value: () => show(r), enumerable: false });
}

function show(r: FuzzRequest): string {
  return JSON.stringify({
    method: r.method,
    path: r.path,
    headers: r.headers,
    body: r.body.toString("utf8").slice(0, 3000),
  });
}

interface Tally {
  status: Map<number, number>;
  synced: number;
}

async function fuzz(target: Target, arb: fc.Arbitrary<FuzzRequest>, tally: Tally): Promise<void> {
  // One seed per function, so the functions do not all see the same requests.
  const seed = SEED + targets.indexOf(target);
  const url = target.url!;
  await fc.assert(
    fc.asyncProperty(arb, async (r) => {
      const res = await send(url, r);
      tally.status.set(res.status, (tally.status.get(res.status) ?? 0) + 1);
      assert.ok(
        res.status >= 200 && res.status < 500,
        `${target.name}: ${res.status} ${res.text}\n${show(r)}`,
      );
      if (res.status === 204 || r.path === "/metrics") return;
      assert.match(res.type, /^application\/json/, `${target.name}: ${res.status} ${res.type} ${res.text}`);
      const answer = JSON.parse(res.text) as Record<string, unknown>;
      if (res.status >= 400) {
        assert.equal(typeof answer.error, "string", res.text);
        assert.ok(!/\n\s+at /.test(res.text), `a stack trace in the answer: ${res.text}`);
      } else if (
        Array.isArray(answer.results) &&
        answer.results.some((x) => JSON.stringify(x).includes('"synced"'))
      )
        tally.synced++;
    }),
    { seed, numRuns: RUNS },
  );
}

async function afterFuzz(target: Target): Promise<void> {
  const health = await send(target.url!, {
    method: "GET",
    path: "/healthz",
    headers: [],
    body: Buffer.alloc(0),
  });
  assert.equal(health.status, 200, `${target.name} no longer answers /healthz`);
  assert.deepEqual(uncaught, [], `uncaught errors while fuzzing ${target.name}`);
  assert.deepEqual(objectWrites(await sandbox.admin.counters()), [], `${target.name} wrote to the API`);
  const calls = (await sandbox.csi.stats()).calls;
  assert.deepEqual(
    mutatingCsi.filter((m) => (calls[m] ?? 0) > 0),
    [],
    `${target.name} changed the CSI driver: ${JSON.stringify(calls)}`,
  );
}

describe("random requests to every function: never a 5xx, never a crash, never a write", () => {
  for (const name of ["binder", "provisioner", "attacher", "attach-detach"]) {
    it(name, async () => {
      const target = targets.find((t) => t.name === name)!;
      await sandbox.admin.resetCounters();
      await sandbox.csi.resetStats();
      const tally: Tally = { status: new Map(), synced: 0 };
      await fuzz(target, controllerRequest(), tally);
      await afterFuzz(target);
      if (process.env.FUZZ_DEBUG) console.log(name, tally.synced, JSON.stringify([...tally.status]));
      // The generators reach the controllers, not only the envelope parser's 400s.
      assert.ok(
        tally.synced >= RUNS / 10,
        `${name}: only ${tally.synced} synced; ${JSON.stringify([...tally.status])}`,
      );
      assert.ok((tally.status.get(400) ?? 0) >= RUNS / 10, `${name}: ${JSON.stringify([...tally.status])}`);
      const reads = await sandbox.admin.counters();
      assert.ok(
        Object.keys(reads).some((k) => k.startsWith("get ")),
        "objects were read",
      );
    });
  }

  it("admission", async () => {
    const target = targets.find((t) => t.name === "admission")!;
    await sandbox.admin.resetCounters();
    await sandbox.csi.resetStats();
    const tally: Tally = { status: new Map(), synced: 0 };
    await fuzz(target, admissionRequest(), tally);
    await afterFuzz(target);
    assert.ok((tally.status.get(200) ?? 0) >= RUNS / 4, JSON.stringify([...tally.status]));
  });
});
