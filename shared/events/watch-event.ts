// A plain Kubernetes watch event, {"type": "ADDED", "object": {...}}, as the
// bundled forwarder (or any watch-to-HTTP bridge) posts it.

import { isRecord } from "../is-record.ts";
import { describeType, quote } from "./describe.ts";
import { EnvelopeError } from "./errors.ts";
import { referenceOf, validateKubeObject } from "./kube-object.ts";
import type { ParsedEvent, ResourceAction, ResourceEvent } from "./types.ts";

const ACTIONS: ReadonlyMap<string, ResourceAction> = new Map([
  ["ADDED", "add"],
  ["MODIFIED", "update"],
  ["DELETED", "delete"],
]);

export function fromWatchEvent(value: unknown): ParsedEvent {
  if (!isRecord(value)) {
    throw new EnvelopeError(
      `a watch event must be a JSON object {"type": ..., "object": {...}}, got ${describeType(value)}` +
        (Array.isArray(value)
          ? " (a CloudEvents batch needs Content-Type application/cloudevents-batch+json)"
          : ""),
    );
  }
  const type = value.type;
  if (typeof type !== "string") {
    throw new EnvelopeError(
      `watch event "type" must be one of ADDED, MODIFIED, DELETED, BOOKMARK, ERROR, got ${describeType(type)}`,
    );
  }
  const action = ACTIONS.get(type);
  if (action === undefined) {
    if (type === "BOOKMARK") return { kind: "ignored", reason: "watch BOOKMARK event carries no change" };
    if (type === "ERROR")
      return { kind: "ignored", reason: `watch ERROR event${statusMessage(value.object)}` };
    const hint = Object.hasOwn(value, "specversion")
      ? "; this looks like a structured CloudEvent: send it with Content-Type application/cloudevents+json"
      : "";
    throw new EnvelopeError(
      `watch event type ${quote(type)} is unknown; expected ADDED, MODIFIED or DELETED (BOOKMARK and ERROR are ignored)${hint}`,
    );
  }
  const object = validateKubeObject(value.object, "watch event object");
  const result: ResourceEvent = { kind: "resource", action, ref: referenceOf(object), object };
  const rv = object.metadata.resourceVersion;
  if (rv !== undefined && rv !== "") result.resourceVersion = rv;
  return result;
}

/** ": <message>" from the metav1.Status an ERROR event carries, shortened; "" without one. */
function statusMessage(status: unknown): string {
  if (!isRecord(status) || typeof status.message !== "string" || status.message === "") return "";
  const message = status.message;
  return `: ${message.length <= 200 ? message : `${message.slice(0, 200)}…`}`;
}
