// shared/events/cloudevent.ts checks CloudEvents by hand, in place of the
// cloudevents SDK (v10) it used to call. Here the SDK is the oracle: for
// attribute values on both sides of each rule, an event is refused by
// parseEventRequest exactly when the SDK, driven as the module used to drive
// it (HTTP.toEvent, then validate()), refuses it.

import assert from "node:assert/strict";
import { test } from "node:test";
import { type CloudEvent, HTTP } from "cloudevents";
import { EnvelopeError, parseEventRequest } from "../../shared/events/index.ts";
import { binaryHeaders, json, pvc, STRUCTURED, structuredEvent } from "./fixtures.ts";

const ADD = "dev.knative.apiserver.resource.add";

/** Attribute values the SDK accepts and refuses, by attribute; undefined means absent. */
const VALUES: Record<string, unknown[]> = {
  source: ["https://10.96.0.1:443", "/apis/v1", "urn:uuid:1", "1-555-123", "a b", "http://x/%zz", 'q"'],
  dataschema: [undefined, "https://example.com/s.json", "urn:x", "no-scheme", "/relative", "a b"],
  time: [
    undefined,
    "2026-11-21T10:00:00Z",
    "2026-11-21T10:00:00.123456+02:00",
    "not a time",
    "9999-12-31T23:59:59-01:00",
    "0000-01-01T00:00:00+01:00",
    "Jan 1 10000",
  ],
  schemaurl: [undefined, "https://example.com/s"],
  validate: [undefined, "yes"],
  subject: [undefined, "/apis/v1/namespaces/a/persistentvolumeclaims/b"],
};

/** How the SDK saw one event: undefined when it accepted it, else its error. */
function sdkRefusal(headers: Record<string, string>, body: unknown): string | undefined {
  try {
    const event = HTTP.toEvent({ headers, body });
    (event as CloudEvent<unknown>).validate();
    return undefined;
  } catch (err) {
    return String(err);
  }
}

function ourRefusal(headers: Record<string, string>, body: unknown): string | undefined {
  try {
    parseEventRequest(headers, body);
    return undefined;
  } catch (err) {
    assert.ok(err instanceof EnvelopeError, String(err));
    return err.message;
  }
}

function agree(what: string, sdk: string | undefined, ours: string | undefined): void {
  assert.equal(
    ours === undefined,
    sdk === undefined,
    `${what}: SDK ${sdk ?? "accepts"}, ours ${ours ?? "accepts"}`,
  );
  if (ours !== undefined) assert.match(ours, /^not a valid CloudEvent: /, what);
}

for (const [attribute, values] of Object.entries(VALUES)) {
  test(`binary mode: ce-${attribute} is refused exactly when the SDK refuses it`, () => {
    for (const value of values) {
      const headers = binaryHeaders("add");
      if (value === undefined) delete headers[`ce-${attribute}`];
      else headers[`ce-${attribute}`] = String(value);
      // The module handed the SDK its attributes and the bare media type, never the body.
      const message: Record<string, string> = { "content-type": "application/json" };
      for (const [name, v] of Object.entries(headers)) if (name.startsWith("ce-")) message[name] = v;
      agree(
        `ce-${attribute}: ${String(value)}`,
        sdkRefusal(message, undefined),
        ourRefusal(headers, json(pvc())),
      );
    }
  });

  test(`structured mode: "${attribute}" is refused exactly when the SDK refuses it`, () => {
    for (const value of values) {
      const body = json(structuredEvent(ADD, pvc(), { [attribute]: value }));
      // The module handed the SDK the parsed body.
      agree(
        `"${attribute}": ${String(value)}`,
        sdkRefusal({ "content-type": "application/cloudevents+json" }, JSON.parse(body.toString())),
        ourRefusal(STRUCTURED, body),
      );
    }
  });
}

test("binary mode: empty optional headers are refused exactly when the SDK refuses them", () => {
  for (const attribute of ["subject", "time", "dataschema", "datacontenttype", "schemaurl"]) {
    const headers = binaryHeaders("add", { [`ce-${attribute}`]: "" });
    const message: Record<string, string> = { "content-type": "application/json" };
    for (const [name, v] of Object.entries(headers)) if (name.startsWith("ce-")) message[name] = v;
    agree(`empty ce-${attribute}`, sdkRefusal(message, undefined), ourRefusal(headers, json(pvc())));
  }
});

test("structured mode: extension names and odd members are refused exactly when the SDK refuses them", () => {
  const extras: Array<Record<string, unknown>> = [
    { myext: 1 },
    { myExt: 1 },
    { "my-ext": "x" },
    { ext9: { nested: true } },
    { validate: null },
    { schemaurl: 0 },
    { datacontentencoding: "base64", data: "e30=" },
    { datacontentencoding: "base64", data: 5 },
    { datacontentencoding: "base64", data: { a: 1 } },
    { datacontentencoding: "gzip" },
  ];
  for (const extra of extras) {
    // A type we ignore, so that only the envelope is judged, not the data.
    const body = json(structuredEvent("com.example.other", pvc(), extra));
    agree(
      JSON.stringify(extra),
      sdkRefusal({ "content-type": "application/cloudevents+json" }, JSON.parse(body.toString())),
      ourRefusal(STRUCTURED, body),
    );
  }
  // JSON.parse reads 1e999 as Infinity, which the SDK's schema refuses as data.
  const infinite = json(structuredEvent(ADD, "INF")).toString().replace('"INF"', "1e999");
  const parsed = JSON.parse(infinite);
  agree(
    "data 1e999",
    sdkRefusal({ "content-type": "application/cloudevents+json" }, parsed),
    ourRefusal(STRUCTURED, infinite),
  );
});
