// Maps one checked CloudEvent to a ParsedEvent: Knative ApiServerSource
// changes (Resource and Reference mode), PingSource ticks, and everything
// else ignored (2xx, not an error: a trigger or broker may send us more types
// than we handle).

import type { ApiServerExtensions, ReceivedCloudEvent } from "./cloudevent.ts";
import { quote } from "./describe.ts";
import { EnvelopeError } from "./errors.ts";
import { referenceOf, validateKubeObject, validateObjectReference } from "./kube-object.ts";
import type { ObjectReference, ParsedEvent, ResourceAction, ResourceEvent } from "./types.ts";

export const PING_EVENT_TYPE = "dev.knative.sources.ping";

/** Every ApiServerSource event type, with its mode and action. */
const APISERVER_TYPES: ReadonlyMap<string, { mode: "resource" | "ref"; action: ResourceAction }> = new Map(
  (["resource", "ref"] as const).flatMap((mode) =>
    (["add", "update", "delete"] as const).map((action) => [
      `dev.knative.apiserver.${mode}.${action}`,
      { mode, action },
    ]),
  ),
);

export function fromCloudEvent(event: ReceivedCloudEvent): ParsedEvent {
  const { id, type, source } = event;
  if (type === PING_EVENT_TYPE) return { kind: "resync", id };
  const known = APISERVER_TYPES.get(type);
  if (known === undefined) {
    return { kind: "ignored", reason: `CloudEvent type ${quote(type)} is not handled`, id };
  }
  const { mode, action } = known;

  const data = event.readData();
  if (data === undefined) {
    const expected = mode === "resource" ? "the Kubernetes object" : "{apiVersion, kind, name, namespace}";
    throw new EnvelopeError(`a ${type} CloudEvent must carry ${expected} as its data, got nothing`);
  }
  if (typeof data === "string") {
    // Some senders JSON-encode the object twice; say so rather than "got a string".
    throw new EnvelopeError(
      "CloudEvent data is a JSON string, not an object; send the object itself, not its JSON text",
    );
  }

  if (mode === "ref") {
    // Reference mode: data wins. With spec.owner, data may reference the
    // owning controller while the extensions describe the changed object,
    // so the two are not compared.
    return { kind: "resource", action, ref: validateObjectReference(data, "CloudEvent data"), id, source };
  }
  const object = validateKubeObject(data, "CloudEvent data");
  const ref = referenceOf(object);
  // The extensions describe the same object as data; disagreement means the
  // event was assembled wrongly (or tampered with) and cannot be trusted.
  checkExtensionsAgree(event.extensions, ref);
  const result: ResourceEvent = { kind: "resource", action, ref, object, id, source };
  const rv = object.metadata.resourceVersion;
  if (rv !== undefined && rv !== "") result.resourceVersion = rv;
  return result;
}

function checkExtensionsAgree(ext: ApiServerExtensions, ref: ObjectReference): void {
  const pairs: Array<[keyof ApiServerExtensions, string | undefined, string]> = [
    ["kind", ref.kind, "kind"],
    ["apiversion", ref.apiVersion, "apiVersion"],
    ["name", ref.name, "metadata.name"],
    ["namespace", ref.namespace, "metadata.namespace"],
  ];
  for (const [extension, actual, field] of pairs) {
    const claimed = ext[extension];
    if (claimed === undefined || claimed === actual) continue;
    throw new EnvelopeError(
      `CloudEvent extension ${extension} is ${quote(claimed)} but data.${field} is ${quote(actual ?? "")}; they must agree`,
    );
  }
}
