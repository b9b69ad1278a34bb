// A change as Knative ApiServerSource (Resource mode) sends it: a binary-mode
// CloudEvent, attributes in ce-* headers and the object as the JSON body. Or
// several changes in one request, in the CloudEvents JSON batch format, each
// a structured-mode event with the same attributes and the object as `data`.

import type { Change } from "./change.ts";

export const EVENT_TYPE_PREFIX = "dev.knative.apiserver.resource.";

export interface EventRequest {
  headers: Record<string, string>;
  body: string;
}

/** One JSON text per watched object, however many destinations it goes to (objects are never changed once received). */
const bodies = new WeakMap<object, string>();

function bodyOf(object: object): string {
  let body = bodies.get(object);
  if (body === undefined) {
    body = JSON.stringify(object);
    bodies.set(object, body);
  }
  return body;
}

/**
 * `source` is the API server URL, as ApiServerSource sets it. Built once per
 * delivery: its retries send the very same headers (same ce-id) and body.
 */
export function cloudEventRequest(change: Change, source: string): EventRequest {
  const { object, resource } = change;
  const namespace = object.metadata.namespace ?? "";
  return {
    headers: {
      "content-type": "application/json",
      "ce-specversion": "1.0",
      "ce-id": change.id,
      "ce-type": `${EVENT_TYPE_PREFIX}${change.action}`,
      "ce-source": source,
      "ce-subject": subjectOf(object.apiVersion, namespace, resource.plural, object.metadata.name),
      "ce-kind": object.kind,
      "ce-apiversion": object.apiVersion,
      "ce-name": object.metadata.name,
      // Cluster-scoped objects get an empty namespace, like ApiServerSource;
      // shared/events reads an empty extension as absent.
      "ce-namespace": namespace,
    },
    body: bodyOf(object),
  };
}

/**
 * ApiServerSource's selfLink-like subject: /apis/<apiVersion>/namespaces/<ns>/<plural>/<name>,
 * core kinds under /apis/v1 too and an empty namespace segment for
 * cluster-scoped ones (knative eventing's createSelfLink). Receivers treat it as opaque.
 */
export function subjectOf(apiVersion: string, namespace: string, plural: string, name: string): string {
  return `/apis/${apiVersion}/namespaces/${namespace}/${plural}/${name}`;
}

export const BATCH_CONTENT_TYPE = "application/cloudevents-batch+json";

/** Several changes (of different objects) as one CloudEvents batch; the objects' JSON texts are reused, not rebuilt. */
export function cloudEventBatchRequest(changes: readonly Change[], source: string): EventRequest {
  const events = changes.map((change) => {
    const { object, resource } = change;
    const namespace = object.metadata.namespace ?? "";
    const attributes: Record<string, string> = {
      specversion: "1.0",
      id: change.id,
      type: `${EVENT_TYPE_PREFIX}${change.action}`,
      source,
      subject: subjectOf(object.apiVersion, namespace, resource.plural, object.metadata.name),
      datacontenttype: "application/json",
      kind: object.kind,
      apiversion: object.apiVersion,
      name: object.metadata.name,
    };
    // Absent rather than empty for a cluster-scoped object: an empty attribute is not valid in structured mode.
    if (namespace) attributes.namespace = namespace;
    const head = JSON.stringify(attributes);
    return `${head.slice(0, -1)},"data":${bodyOf(object)}}`;
  });
  return { headers: { "content-type": BATCH_CONTENT_TYPE }, body: `[${events.join(",")}]` };
}
