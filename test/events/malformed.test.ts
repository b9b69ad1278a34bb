// Every malformed request is refused with an EnvelopeError whose message says
// what is wrong and, where it helps, what to send instead.

import assert from "node:assert/strict";
import { test } from "node:test";
import { EnvelopeError, parseEventRequest } from "../../shared/events/index.ts";
import { BATCH, binaryHeaders, JSON_CT, json, pvc, STRUCTURED, structuredEvent } from "./fixtures.ts";

const MB = "m".repeat(1 << 20);
const ADD = "dev.knative.apiserver.resource.add";
const REF_ADD = "dev.knative.apiserver.ref.add";

/** The binary headers of an add event without the given header. */
function binaryWithout(name: string): Record<string, string> {
  const headers = binaryHeaders("add");
  delete headers[name];
  return headers;
}

/** pvc() with metadata fields replaced. */
function pvcWithMetadata(metadata: Record<string, unknown>) {
  const claim = pvc();
  return { ...claim, metadata: { ...claim.metadata, ...metadata } };
}

function nested(depth: number): unknown {
  let value: unknown = {};
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

const cyclic: Record<string, unknown> = { type: "ADDED" };
cyclic.object = cyclic;

interface Case {
  name: string;
  headers: unknown;
  body: unknown;
  /** Exact message, or a pattern for messages that quote engine-specific text. */
  message: string | RegExp;
}

const cases: Case[] = [
  // --- CloudEvents, binary mode: attributes ---
  {
    name: "binary: missing ce-specversion",
    headers: binaryWithout("ce-specversion"),
    body: json(pvc()),
    message:
      "ce-specversion header is missing; a binary-mode CloudEvent needs ce-specversion: 1.0 (with ce-id, ce-type, ce-source)",
  },
  {
    name: "binary: wrong specversion",
    headers: binaryHeaders("add", { "ce-specversion": "0.3" }),
    body: json(pvc()),
    message: 'ce-specversion header is "0.3"; only CloudEvents 1.0 is supported',
  },
  {
    name: "binary: missing ce-id",
    headers: binaryWithout("ce-id"),
    body: json(pvc()),
    message: "ce-id header is missing",
  },
  {
    name: "binary: missing ce-type",
    headers: binaryWithout("ce-type"),
    body: json(pvc()),
    message: "ce-type header is missing",
  },
  {
    name: "binary: missing ce-source",
    headers: binaryWithout("ce-source"),
    body: json(pvc()),
    message: "ce-source header is missing",
  },
  {
    name: "binary: empty ce-type",
    headers: binaryHeaders("add", { "ce-type": "" }),
    body: json(pvc()),
    message: "ce-type header must be a non-empty string, got an empty string",
  },
  {
    name: "binary: ce-source is not a URI reference",
    headers: binaryHeaders("add", { "ce-source": "https://api server:443" }),
    body: json(pvc()),
    message: 'not a valid CloudEvent: "source" must match format "uri-reference"',
  },
  {
    name: "binary: ce-dataschema is not a URI",
    headers: binaryHeaders("add", { "ce-dataschema": "schemas/pvc.json" }),
    body: json(pvc()),
    message: 'not a valid CloudEvent: "dataschema" must match format "uri"',
  },
  {
    name: "binary: empty ce-subject",
    headers: binaryHeaders("add", { "ce-subject": "" }),
    body: json(pvc()),
    message: 'not a valid CloudEvent: "subject" must NOT have fewer than 1 characters',
  },
  {
    name: "binary: ce-time past year 9999",
    headers: binaryHeaders("add", { "ce-time": "9999-12-31T23:59:59-01:00" }),
    body: json(pvc()),
    message: 'not a valid CloudEvent: "time" must match format "date-time"',
  },
  {
    name: "binary: 1 MB ce-id",
    headers: binaryHeaders("add", { "ce-id": MB }),
    body: json(pvc()),
    message: "header ce-id is 1048576 characters long; the limit is 4096",
  },
  {
    name: "binary: 1 MB ce-kind extension",
    headers: binaryHeaders("add", { "ce-kind": MB }),
    body: json(pvc()),
    message: "header ce-kind is 1048576 characters long; the limit is 4096",
  },
  {
    name: "binary: ce-specversion sent twice",
    headers: { ...binaryHeaders("add"), "ce-specversion": ["1.0", "1.0"] },
    body: json(pvc()),
    message: "header ce-specversion was sent 2 times; send it once",
  },
  {
    name: "binary: the same header under two spellings",
    headers: { ...binaryHeaders("add"), "CE-ID": "other" },
    body: json(pvc()),
    message: "header ce-id was sent more than once; send it once",
  },
  {
    name: "binary: header value is a number",
    headers: { ...binaryHeaders("add"), "ce-id": 42 },
    body: json(pvc()),
    message: "header ce-id must be a string, got a number",
  },
  {
    name: "binary: header value is an array of objects",
    headers: { ...binaryHeaders("add"), "ce-type": [{}] },
    body: json(pvc()),
    message: "header ce-type must be a string, got an array",
  },
  {
    name: "Content-Type that is not a media type",
    headers: binaryHeaders("add", { "content-type": "json" }),
    body: json(pvc()),
    message: 'Content-Type "json" is not a media type like application/json',
  },
  {
    name: "1 MB Content-Type",
    headers: binaryHeaders("add", { "content-type": `application/${MB}` }),
    body: json(pvc()),
    message: "Content-Type is 1048588 characters long; the limit is 256",
  },

  // --- CloudEvents, binary mode: data ---
  {
    name: "binary: body not JSON",
    headers: binaryHeaders("add"),
    body: Buffer.from("apiVersion: v1\nkind: PersistentVolumeClaim\n"),
    message: /^CloudEvent data \(request body\) is not valid JSON: Unexpected token/,
  },
  {
    name: "binary: empty body for a resource event",
    headers: binaryHeaders("add"),
    body: Buffer.alloc(0),
    message:
      "a dev.knative.apiserver.resource.add CloudEvent must carry the Kubernetes object as its data, got nothing",
  },
  {
    name: "binary: no body at all for a ref event",
    headers: binaryHeaders("add", { "ce-type": REF_ADD }),
    body: undefined,
    message:
      "a dev.knative.apiserver.ref.add CloudEvent must carry {apiVersion, kind, name, namespace} as its data, got nothing",
  },
  {
    name: "binary: data is a number",
    headers: binaryHeaders("add"),
    body: Buffer.from("42"),
    message: "CloudEvent data must be a Kubernetes object (a JSON object), got a number",
  },
  {
    name: "binary: data is an array",
    headers: binaryHeaders("add"),
    body: json([pvc()]),
    message: "CloudEvent data must be a Kubernetes object (a JSON object), got an array",
  },
  {
    name: "binary: data is null",
    headers: binaryHeaders("add"),
    body: Buffer.from("null"),
    message: "CloudEvent data must be a Kubernetes object (a JSON object), got null",
  },
  {
    name: "binary: data is the object JSON-encoded twice",
    headers: binaryHeaders("add"),
    body: json(JSON.stringify(pvc())),
    message: "CloudEvent data is a JSON string, not an object; send the object itself, not its JSON text",
  },
  {
    name: "binary: data with a non-JSON Content-Type",
    headers: binaryHeaders("add", { "content-type": "text/plain" }),
    body: json(pvc()),
    message: 'CloudEvent data has Content-Type "text/plain"; expected application/json',
  },
  {
    name: "binary: body is not UTF-8",
    headers: binaryHeaders("add"),
    body: Buffer.from([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x7d]),
    message: "request body is not valid UTF-8",
  },
  {
    name: "binary: object without metadata",
    headers: binaryHeaders("add"),
    body: json({ apiVersion: "v1", kind: "PersistentVolumeClaim", spec: {} }),
    message: "CloudEvent data.metadata must be an object, got nothing",
  },
  {
    name: "binary: metadata is an array",
    headers: binaryHeaders("add"),
    body: json({ apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: [] }),
    message: "CloudEvent data.metadata must be an object, got an array",
  },
  {
    name: "binary: object without metadata.name",
    headers: binaryHeaders("add"),
    body: json(pvcWithMetadata({ name: undefined })),
    message: "CloudEvent data.metadata.name must be a non-empty string, got nothing",
  },
  {
    name: "binary: metadata.name is a number",
    headers: binaryHeaders("add"),
    body: json(pvcWithMetadata({ name: 7 })),
    message: "CloudEvent data.metadata.name must be a non-empty string, got a number",
  },
  {
    name: "binary: metadata.name is not a name",
    headers: binaryHeaders("add", { "ce-name": "" }),
    body: json(pvcWithMetadata({ name: "../secrets/x" })),
    message:
      "CloudEvent data.metadata.name \"../secrets/x\" is not valid (expected a Kubernetes object name: letters, digits, '-', '.', starting and ending with a letter or digit)",
  },
  {
    name: "binary: 1 MB metadata.name",
    headers: binaryHeaders("add", { "ce-name": "" }),
    body: json(pvcWithMetadata({ name: MB })),
    message: "CloudEvent data.metadata.name is 1048576 characters long; the limit is 253",
  },
  {
    name: "binary: namespace is not a DNS label",
    headers: binaryHeaders("add", { "ce-namespace": "" }),
    body: json(pvcWithMetadata({ namespace: "Data_Bases" })),
    message: `CloudEvent data.metadata.namespace "Data_Bases" is not valid (expected a DNS label: a-z, 0-9 and '-')`,
  },
  {
    name: "binary: metadata.namespace is null",
    headers: binaryHeaders("add", { "ce-namespace": "" }),
    body: json(pvcWithMetadata({ namespace: null })),
    message: "CloudEvent data.metadata.namespace must be a string, got null",
  },
  {
    name: "binary: metadata.uid is a number",
    headers: binaryHeaders("add"),
    body: json(pvcWithMetadata({ uid: 12 })),
    message: "CloudEvent data.metadata.uid must be a string, got a number",
  },
  {
    name: "binary: metadata.resourceVersion is a number",
    headers: binaryHeaders("add"),
    body: json(pvcWithMetadata({ resourceVersion: 184467 })),
    message: "CloudEvent data.metadata.resourceVersion must be a string, got a number",
  },
  {
    name: "binary: kind missing from data",
    headers: binaryHeaders("add"),
    body: json({ ...pvc(), kind: undefined }),
    message: "CloudEvent data.kind must be a non-empty string, got nothing",
  },
  {
    name: "binary: apiVersion is an object",
    headers: binaryHeaders("add"),
    body: json({ ...pvc(), apiVersion: { group: "", version: "v1" } }),
    message: "CloudEvent data.apiVersion must be a non-empty string, got an object",
  },
  {
    name: "binary: apiVersion with a space",
    headers: binaryHeaders("add", { "ce-apiversion": "" }),
    body: json({ ...pvc(), apiVersion: "storage.k8s.io/ v1" }),
    message:
      'CloudEvent data.apiVersion "storage.k8s.io/ v1" is not valid (expected an API version like "v1" or "storage.k8s.io/v1")',
  },
  {
    name: "binary: kind extension disagrees with data",
    headers: binaryHeaders("add", { "ce-kind": "PersistentVolume" }),
    body: json(pvc()),
    message:
      'CloudEvent extension kind is "PersistentVolume" but data.kind is "PersistentVolumeClaim"; they must agree',
  },
  {
    name: "binary: name extension disagrees with data",
    headers: binaryHeaders("add", { "ce-name": "other-claim" }),
    body: json(pvc()),
    message:
      'CloudEvent extension name is "other-claim" but data.metadata.name is "data-postgres-0"; they must agree',
  },
  {
    name: "binary: namespace extension on a cluster-scoped object",
    headers: binaryHeaders("add", { "ce-namespace": "databases" }),
    body: json(pvcWithMetadata({ namespace: undefined })),
    message:
      'CloudEvent extension namespace is "databases" but data.metadata.namespace is ""; they must agree',
  },
  {
    name: "binary: __proto__ key in the object",
    headers: binaryHeaders("add"),
    body: Buffer.from(
      '{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"x","namespace":"databases","__proto__":{"isAdmin":true}}}',
    ),
    message: 'CloudEvent data (request body) has a "__proto__" key in metadata; that key is not allowed',
  },
  {
    name: "binary: __proto__ key deep in a list",
    headers: binaryHeaders("add"),
    body: Buffer.from(
      '{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"x","namespace":"databases","managedFields":[{"a":1},{"fieldsV1":{"__proto__":{"isAdmin":true}}}]}}',
    ),
    message:
      'CloudEvent data (request body) has a "__proto__" key in metadata.managedFields[1].fieldsV1; that key is not allowed',
  },
  {
    name: "binary: ref data without a name",
    headers: binaryHeaders("add", { "ce-type": REF_ADD }),
    body: json({ apiVersion: "v1", kind: "PersistentVolumeClaim", namespace: "databases" }),
    message: "CloudEvent data.name must be a non-empty string, got nothing",
  },
  {
    name: "binary: ref data namespace is a number",
    headers: binaryHeaders("add", { "ce-type": REF_ADD }),
    body: json({ apiVersion: "v1", kind: "PersistentVolumeClaim", name: "a", namespace: 5 }),
    message: "CloudEvent data.namespace must be a string, got a number",
  },
  {
    name: "binary: ref data is a string",
    headers: binaryHeaders("add", { "ce-type": REF_ADD }),
    body: Buffer.from('"v1/PersistentVolumeClaim/databases/a"'),
    message: "CloudEvent data is a JSON string, not an object; send the object itself, not its JSON text",
  },
  {
    name: "binary: body over the size limit",
    headers: binaryHeaders("add"),
    body: Buffer.alloc(3 * 1024 * 1024 + 1, 0x20),
    message: "request body is 3145729 bytes; the limit is 3145728",
  },
  {
    name: "binary: JSON nested too deeply",
    headers: binaryHeaders("add"),
    body: json({ ...pvc(), spec: nested(200) }),
    message: "CloudEvent data (request body) nests deeper than 100 levels",
  },

  // --- CloudEvents, structured mode ---
  {
    name: "structured: missing specversion",
    headers: STRUCTURED,
    body: json({ ...structuredEvent(ADD, pvc()), specversion: undefined }),
    message: '"specversion" is missing; a CloudEvent needs "specversion": "1.0"',
  },
  {
    name: "structured: wrong specversion",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvc(), { specversion: "0.3" })),
    message: '"specversion" is "0.3"; only CloudEvents 1.0 is supported',
  },
  {
    name: "structured: specversion is a number",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvc(), { specversion: 1 })),
    message: '"specversion" must be a string, got a number',
  },
  {
    name: "structured: missing id",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvc(), { id: undefined })),
    message: '"id" is missing',
  },
  {
    name: "structured: id is a number",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvc(), { id: 17 })),
    message: '"id" must be a non-empty string, got a number',
  },
  {
    name: "structured: type is null",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvc(), { type: null })),
    message: '"type" must be a non-empty string, got null',
  },
  {
    name: "structured: time is an object",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvc(), { time: { toString: 1 } })),
    message: '"time" must be a non-empty string, got an object',
  },
  {
    name: "structured: 1 MB subject",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvc(), { subject: MB })),
    message: '"subject" is 1048576 characters long; the limit is 4096',
  },
  {
    name: "structured: kind extension is a number",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvc(), { kind: 3 })),
    message: 'CloudEvent extension "kind" must be a string, got a number',
  },
  {
    name: "structured: attribute name that CloudEvents forbids",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvc(), { apiVersion: "v1" })),
    message: 'not a valid CloudEvent: invalid attribute name: "apiVersion"',
  },
  {
    name: "structured: a v0.3 schemaurl",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvc(), { schemaurl: "https://example.com/pvc.json" })),
    message: "not a valid CloudEvent: cannot set schemaurl on version 1.0 event",
  },
  {
    name: "structured: data that JSON.parse reads as Infinity",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, "INF")).toString().replace('"INF"', "1e999"),
    message: 'not a valid CloudEvent: "data" must be object,string,number,array,boolean,null',
  },
  {
    name: "structured: body not JSON",
    headers: STRUCTURED,
    body: Buffer.from("{'specversion': '1.0'}"),
    message: /^request body is not valid JSON: /,
  },
  {
    name: "structured: empty body",
    headers: STRUCTURED,
    body: Buffer.from("  \n"),
    message:
      "request body is empty; Content-Type application/cloudevents+json needs the event as a JSON object",
  },
  {
    name: "structured: array body",
    headers: STRUCTURED,
    body: json([structuredEvent(ADD, pvc())]),
    message:
      "request body is a JSON array; send a batch of CloudEvents with Content-Type application/cloudevents-batch+json",
  },
  {
    name: "structured: body is a JSON number",
    headers: STRUCTURED,
    body: "5",
    message: "a CloudEvent must be a JSON object, got a number",
  },
  {
    name: "structured: data is not an object",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, true)),
    message: "CloudEvent data must be a Kubernetes object (a JSON object), got a boolean",
  },
  {
    name: "structured: data missing",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, undefined)),
    message:
      "a dev.knative.apiserver.resource.add CloudEvent must carry the Kubernetes object as its data, got nothing",
  },
  {
    name: "structured: non-JSON datacontenttype",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvc(), { datacontenttype: "application/xml" })),
    message: 'CloudEvent datacontenttype is "application/xml"; expected application/json',
  },
  {
    name: "structured: data and data_base64",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvc(), { data_base64: "e30=" })),
    message: 'a CloudEvent has either "data" or "data_base64", not both',
  },
  {
    name: "structured: data_base64 that is not base64",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, undefined, { data_base64: "not base64!" })),
    message: '"data_base64" is not valid base64',
  },
  {
    name: "structured: data_base64 is a number",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, undefined, { data_base64: 12 })),
    message: '"data_base64" must be a base64 string, got a number',
  },
  {
    name: "structured: __proto__ at the top level",
    headers: STRUCTURED,
    body: `{"specversion":"1.0","id":"1","source":"/s","type":"${ADD}","__proto__":{"polluted":true}}`,
    message: 'request body has a "__proto__" key; that key is not allowed',
  },
  {
    name: "structured: __proto__ deep in data",
    headers: STRUCTURED,
    body: `{"specversion":"1.0","id":"1","source":"/s","type":"${ADD}","data":{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"a","labels":{"__proto__":"x"}}}}`,
    message: 'request body has a "__proto__" key in data.metadata.labels; that key is not allowed',
  },
  {
    name: "structured: unsupported event format",
    headers: { "content-type": "application/cloudevents+xml" },
    body: "<event/>",
    message:
      'Content-Type "application/cloudevents+xml" is not supported; send CloudEvents as application/cloudevents+json or application/cloudevents-batch+json',
  },
  {
    name: "structured: 1 MB metadata.name",
    headers: STRUCTURED,
    body: json(structuredEvent(ADD, pvcWithMetadata({ name: MB }), { name: undefined })),
    message: "CloudEvent data.metadata.name is 1048576 characters long; the limit is 253",
  },

  // --- CloudEvents, batched mode ---
  {
    name: "batch: not an array",
    headers: BATCH,
    body: json(structuredEvent(ADD, pvc())),
    message: "a CloudEvents batch must be a JSON array of events, got an object",
  },
  {
    name: "batch: an element is not an object",
    headers: BATCH,
    body: json([structuredEvent(ADD, pvc()), 5]),
    message: "batch event 1: a CloudEvent must be a JSON object, got a number",
  },
  {
    name: "batch: an element without id",
    headers: BATCH,
    body: json([structuredEvent(ADD, pvc(), { id: undefined })]),
    message: 'batch event 0: "id" is missing',
  },
  {
    name: "batch: an element with a bad object",
    headers: BATCH,
    body: json([structuredEvent(ADD, pvc()), structuredEvent(ADD, pvcWithMetadata({ name: null }))]),
    message: "batch event 1: CloudEvent data.metadata.name must be a non-empty string, got null",
  },
  {
    name: "batch: empty body",
    headers: BATCH,
    body: "",
    message: "request body is empty; a CloudEvents batch is a JSON array",
  },
  {
    name: "batch: too many events",
    headers: BATCH,
    body: json(Array.from({ length: 1001 }, () => ({}))),
    message: "the batch has 1001 events; the limit is 1000",
  },

  // --- plain watch events ---
  {
    name: "watch: unknown type",
    headers: JSON_CT,
    body: json({ type: "CREATED", object: pvc() }),
    message:
      'watch event type "CREATED" is unknown; expected ADDED, MODIFIED or DELETED (BOOKMARK and ERROR are ignored)',
  },
  {
    name: "watch: lower-case type",
    headers: JSON_CT,
    body: json({ type: "added", object: pvc() }),
    message:
      'watch event type "added" is unknown; expected ADDED, MODIFIED or DELETED (BOOKMARK and ERROR are ignored)',
  },
  {
    name: "watch: type is a number",
    headers: JSON_CT,
    body: json({ type: 1, object: pvc() }),
    message: 'watch event "type" must be one of ADDED, MODIFIED, DELETED, BOOKMARK, ERROR, got a number',
  },
  {
    name: "watch: no type",
    headers: JSON_CT,
    body: json(pvc()),
    message: 'watch event "type" must be one of ADDED, MODIFIED, DELETED, BOOKMARK, ERROR, got nothing',
  },
  {
    name: "watch: object missing",
    headers: JSON_CT,
    body: json({ type: "ADDED" }),
    message: "watch event object must be a Kubernetes object (a JSON object), got nothing",
  },
  {
    name: "watch: object is a string",
    headers: JSON_CT,
    body: json({ type: "ADDED", object: "data-postgres-0" }),
    message: "watch event object must be a Kubernetes object (a JSON object), got a string",
  },
  {
    name: "watch: object without metadata.name",
    headers: JSON_CT,
    body: json({ type: "DELETED", object: pvcWithMetadata({ name: "" }) }),
    message: "watch event object.metadata.name must be a non-empty string, got an empty string",
  },
  {
    name: "watch: 1 MB name",
    headers: JSON_CT,
    body: json({ type: "ADDED", object: pvcWithMetadata({ name: MB }) }),
    message: "watch event object.metadata.name is 1048576 characters long; the limit is 253",
  },
  {
    name: "watch: array body",
    headers: JSON_CT,
    body: json([{ type: "ADDED", object: pvc() }]),
    message:
      'a watch event must be a JSON object {"type": ..., "object": {...}}, got an array (a CloudEvents batch needs Content-Type application/cloudevents-batch+json)',
  },
  {
    name: "watch: array already parsed by express.json()",
    headers: JSON_CT,
    body: [],
    message:
      'a watch event must be a JSON object {"type": ..., "object": {...}}, got an array (a CloudEvents batch needs Content-Type application/cloudevents-batch+json)',
  },
  {
    name: "watch: a structured CloudEvent sent as application/json",
    headers: JSON_CT,
    body: json(structuredEvent(ADD, pvc())),
    message:
      'watch event type "dev.knative.apiserver.resource.add" is unknown; expected ADDED, MODIFIED or DELETED (BOOKMARK and ERROR are ignored); this looks like a structured CloudEvent: send it with Content-Type application/cloudevents+json',
  },
  {
    name: "watch: empty body",
    headers: JSON_CT,
    body: Buffer.alloc(0),
    message:
      'request body is empty; expected a watch event {"type": "ADDED", "object": {...}} or a CloudEvent',
  },
  {
    name: "watch: no body, no headers",
    headers: {},
    body: undefined,
    message:
      'request body is empty; expected a watch event {"type": "ADDED", "object": {...}} or a CloudEvent',
  },
  {
    name: "watch: body not JSON",
    headers: JSON_CT,
    body: "type=ADDED",
    message: /^request body is not valid JSON: /,
  },
  {
    name: "watch: truncated JSON",
    headers: JSON_CT,
    body: json({ type: "ADDED", object: pvc() }).subarray(0, 100),
    message: /^request body is not valid JSON: /,
  },
  {
    name: "watch: unsupported Content-Type",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: "type=ADDED",
    message:
      'Content-Type "application/x-www-form-urlencoded" is not supported; send a watch event as application/json, or a CloudEvent (ce-* headers, or application/cloudevents+json)',
  },
  {
    name: "watch: __proto__ in labels",
    headers: JSON_CT,
    body: '{"type":"ADDED","object":{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"a","labels":{"__proto__":{"admin":"true"}}}}}',
    message: 'request body has a "__proto__" key in object.metadata.labels; that key is not allowed',
  },
  {
    name: "watch: __proto__ inside an array element",
    headers: JSON_CT,
    body: '{"type":"ADDED","object":{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"a","ownerReferences":[{"__proto__":1}]}}}',
    message:
      'request body has a "__proto__" key in object.metadata.ownerReferences[0]; that key is not allowed',
  },
  {
    name: "watch: kind is lower-case nonsense",
    headers: JSON_CT,
    body: json({ type: "ADDED", object: { ...pvc(), kind: "persistent volume claim" } }),
    message:
      'watch event object.kind "persistent volume claim" is not valid (expected a kind like "PersistentVolumeClaim")',
  },

  // --- odd types where a request should be ---
  {
    name: "headers are null",
    headers: null,
    body: json({ type: "ADDED", object: pvc() }),
    message: "request headers must be an object of header names to values, got null",
  },
  {
    name: "headers are an array",
    headers: [["content-type", "application/json"]],
    body: json({ type: "ADDED", object: pvc() }),
    message: "request headers must be an object of header names to values, got an array",
  },
  {
    name: "body is an object with a cycle",
    headers: JSON_CT,
    body: cyclic,
    message:
      /^request body is an object that cannot be written as JSON: Converting circular structure to JSON/,
  },
  {
    name: "body is a BigInt",
    headers: JSON_CT,
    body: 10n,
    message: /^request body is a bigint that cannot be written as JSON: /,
  },
  {
    name: "body is a function",
    headers: JSON_CT,
    body: () => 1,
    message: "request body is a function, which has no JSON form",
  },
  {
    name: "body is a number (express.json strict: false)",
    headers: JSON_CT,
    body: 42,
    message: 'a watch event must be a JSON object {"type": ..., "object": {...}}, got a number',
  },
];

for (const c of cases) {
  test(`refused: ${c.name}`, () => {
    assert.throws(
      () => parseEventRequest(c.headers as Record<string, string>, c.body),
      (err: unknown) => {
        assert.ok(err instanceof EnvelopeError, `expected EnvelopeError, got ${String(err)}`);
        assert.equal(err.status, 400);
        if (typeof c.message === "string") assert.equal(err.message, c.message);
        else assert.match(err.message, c.message);
        return true;
      },
    );
  });
}

test("a refused __proto__ key pollutes nothing", () => {
  assert.throws(
    () =>
      parseEventRequest(
        STRUCTURED,
        '{"specversion":"1.0","id":"1","source":"/s","type":"t","__proto__":{"x":1}}',
      ),
    EnvelopeError,
  );
  assert.equal(({} as Record<string, unknown>).x, undefined);
  assert.equal(Object.hasOwn(Object.prototype, "x"), false);
});

test("error messages never echo a megabyte back", () => {
  const inputs: Array<[Record<string, string>, unknown]> = [
    [binaryHeaders("add", { "ce-type": `x${MB}` }), undefined],
    [JSON_CT, json({ type: MB, object: pvc() })],
    [JSON_CT, `{"type":"${MB}`],
    [STRUCTURED, json({ ...structuredEvent(ADD, pvc()), [`X${MB}`]: 1 })],
    [STRUCTURED, json(structuredEvent(ADD, pvcWithMetadata({ namespace: MB })))],
  ];
  for (const [headers, body] of inputs) {
    assert.throws(
      () => parseEventRequest(headers, body),
      (err: unknown) => err instanceof EnvelopeError && err.message.length < 600,
    );
  }
});
