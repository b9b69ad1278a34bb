import assert from "node:assert/strict";
import { test } from "node:test";
import {
  EnvelopeError,
  eventMatchesKind,
  type ParsedEvent,
  parseEventRequest,
} from "../../shared/events/index.ts";
import {
  API_SERVER,
  BATCH,
  binaryHeaders,
  JSON_CT,
  json,
  pv,
  pvc,
  STRUCTURED,
  structuredEvent,
} from "./fixtures.ts";

const PVC_REF = {
  apiVersion: "v1",
  kind: "PersistentVolumeClaim",
  name: "data-postgres-0",
  namespace: "databases",
};
const BINARY_ID = "8a7f0c52-3e9b-4d61-a0f2-6c1d9e4b7a35";
const STRUCTURED_ID = "0b7c1d22-9e4f-4a8b-b6c3-2d5e8f1a4c97";

interface Case {
  name: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  want: ParsedEvent[];
}

const cases: Case[] = [
  ...(["add", "update", "delete"] as const).map(
    (action): Case => ({
      name: `ApiServerSource binary mode, PVC ${action}`,
      headers: binaryHeaders(action),
      body: json(pvc()),
      want: [
        {
          kind: "resource",
          action,
          ref: PVC_REF,
          object: pvc(),
          id: BINARY_ID,
          source: API_SERVER,
          resourceVersion: "184467",
        },
      ],
    }),
  ),
  ...(["add", "update", "delete"] as const).map(
    (action): Case => ({
      name: `ApiServerSource structured mode, PVC ${action}`,
      headers: STRUCTURED,
      body: json(structuredEvent(`dev.knative.apiserver.resource.${action}`, pvc({ phase: "Bound" }))),
      want: [
        {
          kind: "resource",
          action,
          ref: PVC_REF,
          object: pvc({ phase: "Bound" }),
          id: STRUCTURED_ID,
          source: API_SERVER,
          resourceVersion: "184467",
        },
      ],
    }),
  ),
  {
    name: "binary mode with canonical header capitalization and a charset",
    headers: Object.fromEntries(
      Object.entries(binaryHeaders("update", { "content-type": "application/json; charset=utf-8" })).map(
        ([k, v]) => [k.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase()), v],
      ),
    ),
    body: json(pvc()),
    want: [
      {
        kind: "resource",
        action: "update",
        ref: PVC_REF,
        object: pvc(),
        id: BINARY_ID,
        source: API_SERVER,
        resourceVersion: "184467",
      },
    ],
  },
  {
    name: "binary mode without the optional extensions (older adapters)",
    headers: binaryHeaders("add", { "ce-kind": "", "ce-name": "", "ce-namespace": "", "ce-apiversion": "" }),
    body: json(pvc()),
    want: [
      {
        kind: "resource",
        action: "add",
        ref: PVC_REF,
        object: pvc(),
        id: BINARY_ID,
        source: API_SERVER,
        resourceVersion: "184467",
      },
    ],
  },
  {
    name: "binary mode, cluster-scoped PV (empty namespace extension)",
    headers: binaryHeaders("delete", {
      "ce-kind": "PersistentVolume",
      "ce-name": pv().metadata.name,
      "ce-namespace": "",
      "ce-subject": `/apis/v1/namespaces//persistentvolumes/${pv().metadata.name}`,
    }),
    body: json(pv()),
    want: [
      {
        kind: "resource",
        action: "delete",
        ref: { apiVersion: "v1", kind: "PersistentVolume", name: pv().metadata.name },
        object: pv(),
        id: BINARY_ID,
        source: API_SERVER,
        resourceVersion: "184470",
      },
    ],
  },
  {
    name: "Reference mode (binary): data is {apiVersion, kind, name, namespace}",
    headers: binaryHeaders("add", { "ce-type": "dev.knative.apiserver.ref.update" }),
    body: json({
      kind: "PersistentVolumeClaim",
      namespace: "databases",
      name: "data-postgres-0",
      apiVersion: "v1",
    }),
    want: [{ kind: "resource", action: "update", ref: PVC_REF, id: BINARY_ID, source: API_SERVER }],
  },
  {
    name: "Reference mode (structured), cluster-scoped VolumeAttachment without namespace",
    headers: STRUCTURED,
    body: json(
      structuredEvent(
        "dev.knative.apiserver.ref.delete",
        { kind: "VolumeAttachment", name: "csi-0123abcd", apiVersion: "storage.k8s.io/v1" },
        { kind: "VolumeAttachment", apiversion: "storage.k8s.io/v1", name: "csi-0123abcd", namespace: "" },
      ),
    ),
    want: [
      {
        kind: "resource",
        action: "delete",
        ref: { apiVersion: "storage.k8s.io/v1", kind: "VolumeAttachment", name: "csi-0123abcd" },
        id: STRUCTURED_ID,
        source: API_SERVER,
      },
    ],
  },
  {
    name: "batch of two events, one of them a type we ignore",
    headers: BATCH,
    body: json([
      structuredEvent("dev.knative.apiserver.resource.update", pvc({ resourceVersion: "9" }), { id: "e1" }),
      structuredEvent("dev.knative.apiserver.ref.add", PVC_REF, { id: "e2" }),
      {
        specversion: "1.0",
        id: "e3",
        source: "/apis/v1/namespaces/ops/pingsources/x",
        type: "com.example.other",
      },
    ]),
    want: [
      {
        kind: "resource",
        action: "update",
        ref: PVC_REF,
        object: pvc({ resourceVersion: "9" }),
        id: "e1",
        source: API_SERVER,
        resourceVersion: "9",
      },
      { kind: "resource", action: "add", ref: PVC_REF, id: "e2", source: API_SERVER },
      { kind: "ignored", reason: 'CloudEvent type "com.example.other" is not handled', id: "e3" },
    ],
  },
  {
    name: "empty batch",
    headers: BATCH,
    body: "[]",
    want: [],
  },
  {
    name: "PingSource (binary mode, JSON data) → resync",
    headers: {
      "content-type": "application/json",
      "ce-specversion": "1.0",
      "ce-id": "ping-1",
      "ce-source": "/apis/v1/namespaces/storage-system/pingsources/resync",
      "ce-type": "dev.knative.sources.ping",
    },
    body: json({ reason: "periodic" }),
    want: [{ kind: "resync", id: "ping-1" }],
  },
  {
    name: "PingSource with a text body and no data at all is fine: ping data is never read",
    headers: {
      "content-type": "text/plain",
      "ce-specversion": "1.0",
      "ce-id": "ping-2",
      "ce-source": "/apis/v1/namespaces/storage-system/pingsources/resync",
      "ce-type": "dev.knative.sources.ping",
    },
    body: Buffer.from("not json at all"),
    want: [{ kind: "resync", id: "ping-2" }],
  },
  {
    name: "PingSource structured",
    headers: STRUCTURED,
    body: json({
      specversion: "1.0",
      id: "ping-3",
      source: "/apis/v1/namespaces/storage-system/pingsources/resync",
      type: "dev.knative.sources.ping",
    }),
    want: [{ kind: "resync", id: "ping-3" }],
  },
  {
    name: "other CloudEvent types are ignored, not refused",
    headers: binaryHeaders("add", {
      "ce-type": "dev.knative.kafka.event",
      "content-type": "application/octet-stream",
    }),
    body: Buffer.from([0xff, 0x00, 0x13]),
    want: [
      { kind: "ignored", reason: 'CloudEvent type "dev.knative.kafka.event" is not handled', id: BINARY_ID },
    ],
  },
  ...(
    [
      ["ADDED", "add"],
      ["MODIFIED", "update"],
      ["DELETED", "delete"],
    ] as const
  ).map(
    ([type, action]): Case => ({
      name: `watch event ${type}`,
      headers: JSON_CT,
      body: json({ type, object: pvc() }),
      want: [{ kind: "resource", action, ref: PVC_REF, object: pvc(), resourceVersion: "184467" }],
    }),
  ),
  {
    name: "watch event already parsed by express.json()",
    headers: JSON_CT,
    body: { type: "MODIFIED", object: pv() },
    want: [
      {
        kind: "resource",
        action: "update",
        ref: { apiVersion: "v1", kind: "PersistentVolume", name: pv().metadata.name },
        object: pv(),
        resourceVersion: "184470",
      },
    ],
  },
  {
    name: "binary-mode data already parsed by express.json()",
    headers: binaryHeaders("add"),
    body: pvc(),
    want: [
      {
        kind: "resource",
        action: "add",
        ref: PVC_REF,
        object: pvc(),
        id: BINARY_ID,
        source: API_SERVER,
        resourceVersion: "184467",
      },
    ],
  },
  {
    name: "watch event as a string (express.text()) with no Content-Type",
    headers: {},
    body: JSON.stringify({ type: "ADDED", object: pvc() }),
    want: [{ kind: "resource", action: "add", ref: PVC_REF, object: pvc(), resourceVersion: "184467" }],
  },
  {
    name: "UTF-8 byte order mark before the JSON",
    headers: JSON_CT,
    body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), json({ type: "ADDED", object: pvc() })]),
    want: [{ kind: "resource", action: "add", ref: PVC_REF, object: pvc(), resourceVersion: "184467" }],
  },
  {
    name: "watch BOOKMARK is ignored",
    headers: JSON_CT,
    body: json({
      type: "BOOKMARK",
      object: { kind: "PersistentVolumeClaim", apiVersion: "v1", metadata: { resourceVersion: "190000" } },
    }),
    want: [{ kind: "ignored", reason: "watch BOOKMARK event carries no change" }],
  },
  {
    name: "watch ERROR is ignored, with the Status message",
    headers: JSON_CT,
    body: json({
      type: "ERROR",
      object: {
        kind: "Status",
        apiVersion: "v1",
        status: "Failure",
        message: "too old resource version: 1 (184000)",
        reason: "Expired",
        code: 410,
      },
    }),
    want: [{ kind: "ignored", reason: "watch ERROR event: too old resource version: 1 (184000)" }],
  },
  {
    name: "structured mode with data_base64 JSON",
    headers: STRUCTURED,
    body: json({
      specversion: "1.0",
      id: "b64",
      source: API_SERVER,
      type: "dev.knative.apiserver.resource.update",
      datacontenttype: "application/json",
      data_base64: Buffer.from(JSON.stringify(pvc())).toString("base64"),
    }),
    want: [
      {
        kind: "resource",
        action: "update",
        ref: PVC_REF,
        object: pvc(),
        id: "b64",
        source: API_SERVER,
        resourceVersion: "184467",
      },
    ],
  },
  {
    name: "a large but legitimate object (a 1 MB annotation) is accepted",
    headers: JSON_CT,
    body: json({
      type: "MODIFIED",
      object: {
        ...pvc(),
        metadata: { ...pvc().metadata, annotations: { "example.com/blob": "x".repeat(1 << 20) } },
      },
    }),
    want: [
      {
        kind: "resource",
        action: "update",
        ref: PVC_REF,
        object: {
          ...pvc(),
          metadata: { ...pvc().metadata, annotations: { "example.com/blob": "x".repeat(1 << 20) } },
        },
        resourceVersion: "184467",
      },
    ],
  },
];

for (const c of cases) {
  test(c.name, () => {
    assert.deepEqual(parseEventRequest(c.headers, c.body), c.want);
  });
}

test("EnvelopeError is an Error with status 400 and a name", () => {
  const err = new EnvelopeError("bad");
  assert.ok(err instanceof Error);
  assert.equal(err.status, 400);
  assert.equal(err.name, "EnvelopeError");
  assert.equal(err.message, "bad");
});

test("eventMatchesKind matches resource events by exact apiVersion and kind", () => {
  const [claim] = parseEventRequest(binaryHeaders("add"), json(pvc()));
  assert.ok(claim);
  assert.equal(eventMatchesKind(claim, "v1", "PersistentVolumeClaim"), true);
  assert.equal(eventMatchesKind(claim, "v1", "PersistentVolume"), false);
  assert.equal(eventMatchesKind(claim, "storage.k8s.io/v1", "PersistentVolumeClaim"), false);
  assert.equal(eventMatchesKind({ kind: "resync" }, "v1", "PersistentVolumeClaim"), false);
  assert.equal(eventMatchesKind({ kind: "ignored", reason: "x" }, "v1", "PersistentVolumeClaim"), false);
  if (eventMatchesKind(claim, "v1", "PersistentVolumeClaim")) {
    // Narrowed to ResourceEvent: ref is readable without a kind check.
    assert.equal(claim.ref.name, "data-postgres-0");
  }
});

test("the parsed object is a plain JSON object whose fields survive", () => {
  const [event] = parseEventRequest(JSON_CT, json({ type: "ADDED", object: pvc() }));
  assert.ok(event?.kind === "resource" && event.object);
  assert.equal(Object.getPrototypeOf(event.object), Object.prototype);
  assert.deepEqual(event.object.spec, pvc().spec);
  assert.deepEqual(event.object.metadata.finalizers, ["kubernetes.io/pvc-protection"]);
});
