// Whatever arrives, parseEventRequest returns well-formed events or throws an
// EnvelopeError with a message; it never throws anything else.

import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { EnvelopeError, type ParsedEvent, parseEventRequest } from "../../shared/events/index.ts";
import { API_SERVER, BATCH, binaryHeaders, JSON_CT, STRUCTURED } from "./fixtures.ts";

const TYPES = [
  "dev.knative.apiserver.resource.add",
  "dev.knative.apiserver.resource.update",
  "dev.knative.apiserver.resource.delete",
  "dev.knative.apiserver.ref.add",
  "dev.knative.apiserver.ref.update",
  "dev.knative.apiserver.ref.delete",
  "dev.knative.sources.ping",
  "dev.knative.apiserver.resource.patch",
  "com.example.other",
];

/** Usually the valid value, sometimes any JSON value, sometimes absent. */
function mostly<T>(valid: T): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 20, arbitrary: fc.constant(valid) },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
    { weight: 1, arbitrary: fc.constant(undefined) },
    {
      weight: 1,
      arbitrary: fc.constantFrom("", "x".repeat(300), "Bad Name", "a/b", "__proto__", "0".repeat(5000)),
    },
  );
}

const metadata = fc.record({
  name: mostly("data-postgres-0"),
  namespace: mostly("databases"),
  uid: mostly("5f0c6d4e-8a51-4f4b-9a7e-3f1f6b2d9c01"),
  resourceVersion: mostly("184467"),
  labels: fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 }), { maxKeys: 3 }),
});
const kubeObject = fc.record({
  apiVersion: mostly("v1"),
  kind: mostly("PersistentVolumeClaim"),
  metadata: fc.oneof({ weight: 5, arbitrary: metadata }, fc.jsonValue({ maxDepth: 2 })),
  spec: fc.jsonValue({ maxDepth: 3 }),
});
const refData = fc.record({
  apiVersion: mostly("v1"),
  kind: mostly("PersistentVolume"),
  name: mostly("pv-1"),
  namespace: mostly(""),
});
const data = fc.oneof({ weight: 3, arbitrary: kubeObject }, refData, fc.jsonValue({ maxDepth: 3 }));

const cloudEvent = fc.record({
  specversion: mostly("1.0"),
  id: mostly("8a7f0c52"),
  source: mostly(API_SERVER),
  type: fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...TYPES) }, fc.jsonValue({ maxDepth: 1 })),
  datacontenttype: mostly("application/json"),
  time: mostly("2026-11-21T10:00:00Z"),
  kind: mostly("PersistentVolumeClaim"),
  name: mostly("data-postgres-0"),
  namespace: mostly("databases"),
  data,
  data_base64: fc.oneof({ weight: 20, arbitrary: fc.constant(undefined) }, fc.constantFrom("e30=", "!!", 5)),
});
const watchEvent = fc.record({
  type: fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR") },
    fc.jsonValue({ maxDepth: 1 }),
  ),
  object: fc.oneof({ weight: 5, arbitrary: kubeObject }, fc.jsonValue({ maxDepth: 2 })),
});

/** The same value as a Buffer (express.raw), a string (express.text) or as is (express.json). */
function encoded(value: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc.tuple(value, fc.constantFrom("buffer", "string", "parsed", "proto")).map(([v, how]) => {
    const text = JSON.stringify(v) ?? "";
    if (how === "buffer") return Buffer.from(text);
    if (how === "string") return text;
    // Smuggle a "__proto__" key in where a known key was.
    if (how === "proto") return text.replace(/"(name|kind|labels|type)":/, '"__proto__":');
    return v;
  });
}

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
      "ce-kind",
      "ce-name",
      "ce-namespace",
      "ce-apiversion",
      "ce-time",
      "ce-__proto__",
      "__proto__",
      "constructor",
      "ce-",
    ),
  },
  fc.string({ maxLength: 12 }),
);
const headerText = fc.oneof(
  fc.constantFrom(
    "1.0",
    "0.3",
    "application/json",
    "application/cloudevents+json",
    "application/cloudevents-batch+json",
    "text/plain",
    API_SERVER,
    ...TYPES,
    "",
  ),
  fc.string({ maxLength: 20 }),
);
const headerValue = fc.oneof(
  { weight: 4, arbitrary: headerText },
  fc.array(headerText, { maxLength: 3 }),
  fc.anything({ maxDepth: 1 }),
);
const randomHeaders = fc.dictionary(headerName, headerValue, { maxKeys: 6 });

function withOverrides(base: Record<string, string>): fc.Arbitrary<unknown> {
  return fc.tuple(randomHeaders, fc.boolean()).map(([extra, keep]) => (keep ? base : { ...base, ...extra }));
}

const anyBody = fc.oneof(
  fc.anything({
    maxDepth: 3,
    withBigInt: true,
    withMap: true,
    withSet: true,
    withTypedArray: true,
    withBoxedValues: true,
    withNullPrototype: true,
    withObjectString: true,
  }),
  fc.string(),
  fc.json(),
  fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)),
);

const request = fc.oneof(
  fc.tuple(withOverrides(binaryHeaders("add")), encoded(data)),
  fc.tuple(
    withOverrides(binaryHeaders("add")).chain((h) =>
      fc.constantFrom(...TYPES).map((type) => ({ ...(h as Record<string, unknown>), "ce-type": type })),
    ),
    encoded(data),
  ),
  fc.tuple(withOverrides(STRUCTURED), encoded(cloudEvent)),
  fc.tuple(withOverrides(BATCH), encoded(fc.array(cloudEvent, { maxLength: 3 }))),
  fc.tuple(withOverrides(JSON_CT), encoded(watchEvent)),
  fc.tuple(randomHeaders, anyBody),
  fc.tuple(fc.anything({ maxDepth: 1 }), anyBody),
);

const ACTIONS = new Set(["add", "update", "delete"]);

function checkEvent(e: ParsedEvent): void {
  assert.ok(e.id === undefined || typeof e.id === "string");
  switch (e.kind) {
    case "resync":
      return;
    case "ignored":
      assert.equal(typeof e.reason, "string");
      return;
    case "resource": {
      assert.ok(ACTIONS.has(e.action));
      for (const field of [e.ref.apiVersion, e.ref.kind, e.ref.name]) {
        assert.ok(typeof field === "string" && field.length > 0 && field.length <= 317);
      }
      assert.ok(
        e.ref.namespace === undefined || (typeof e.ref.namespace === "string" && e.ref.namespace !== ""),
      );
      assert.ok(!/[/%\s]/.test(e.ref.name), `unsafe name ${e.ref.name}`);
      if (e.object !== undefined) {
        assert.equal(e.object.metadata.name, e.ref.name);
        assert.equal(e.object.kind, e.ref.kind);
        assert.equal(e.object.apiVersion, e.ref.apiVersion);
      }
      return;
    }
    default:
      assert.fail(`unknown event kind ${JSON.stringify(e)}`);
  }
}

test("any request yields ParsedEvent[] or an EnvelopeError, never anything else", () => {
  fc.assert(
    fc.property(request, ([headers, body]) => {
      let result: ParsedEvent[];
      try {
        result = parseEventRequest(headers as Record<string, string>, body);
      } catch (err) {
        if (!(err instanceof EnvelopeError)) throw err;
        assert.equal(err.status, 400);
        assert.ok(err.message.length > 0 && err.message.length < 2000, err.message);
        return;
      }
      assert.ok(Array.isArray(result));
      for (const e of result) checkEvent(e);
    }),
    { numRuns: 3000 },
  );
  assert.deepEqual(Object.keys(Object.prototype), [], "Object.prototype was polluted");
});

test("a fair share of generated requests is accepted (the generators are not all noise)", () => {
  let accepted = 0;
  let refused = 0;
  fc.assert(
    fc.property(request, ([headers, body]) => {
      try {
        if (parseEventRequest(headers as Record<string, string>, body).some((e) => e.kind === "resource"))
          accepted++;
      } catch {
        refused++;
      }
    }),
    { numRuns: 1000, seed: 42 },
  );
  assert.ok(accepted >= 40, `only ${accepted} accepted, ${refused} refused`);
});
