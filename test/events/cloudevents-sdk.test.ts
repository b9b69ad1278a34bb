// Pins the cloudevents SDK (v10) behaviours that shared/events/cloudevent.ts
// works around. If an upgrade changes one of these, revisit the wrapper and
// the comment at its top; the wrapper's own tests keep passing either way.

import assert from "node:assert/strict";
import { test } from "node:test";
import { type CloudEventV1, HTTP } from "cloudevents";

const binary = { "ce-id": "1", "ce-type": "t", "ce-source": "/s", "content-type": "application/json" };

function one(result: CloudEventV1<unknown> | CloudEventV1<unknown>[]): CloudEventV1<unknown> {
  assert.ok(!Array.isArray(result));
  return result;
}

test("binary mode does not validate: no specversion, unknown specversion and missing type all pass", () => {
  assert.equal(one(HTTP.toEvent({ headers: binary, body: "{}" })).specversion, "1.0");
  assert.equal(
    one(HTTP.toEvent({ headers: { ...binary, "ce-specversion": "9.9" }, body: "{}" })).specversion,
    "9.9",
  );
  const { "ce-type": _, ...noType } = binary;
  assert.equal(one(HTTP.toEvent({ headers: noType, body: "{}" })).type, undefined);
});

test("structured mode invents an id when there is none", () => {
  const event = one(
    HTTP.toEvent({
      headers: { "content-type": "application/cloudevents+json" },
      body: '{"specversion":"1.0","type":"t","source":"/s"}',
    }),
  );
  assert.match(event.id, /^[0-9a-f-]{36}$/);
});

test("a Buffer body is not decoded", () => {
  const event = one(HTTP.toEvent({ headers: binary, body: Buffer.from('{"a":1}') }));
  assert.ok(Buffer.isBuffer(event.data));
});

test("Content-Type is matched exactly, so a charset without a space is not JSON", () => {
  const event = one(
    HTTP.toEvent({
      headers: { ...binary, "content-type": "application/json;charset=utf-8" },
      body: '{"a":1}',
    }),
  );
  assert.equal(event.data, '{"a":1}');
});

test("it throws plain TypeErrors and SyntaxErrors, not only ValidationError", () => {
  const repeatedContentType = Object.fromEntries([
    ["content-type", ["a", "b"]],
    ["ce-id", "1"],
  ]);
  assert.throws(() => HTTP.toEvent({ headers: repeatedContentType, body: "{}" }), TypeError);
  assert.throws(() => HTTP.toEvent({ headers: { ...binary }, body: '{"a":' }), SyntaxError);
  assert.throws(
    () => HTTP.toEvent({ headers: { "content-type": "application/cloudevents-batch+json" }, body: "{}" }),
    /forEach is not a function/,
  );
});
