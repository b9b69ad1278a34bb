// What parseEventRequest hands to a function: one normalized event per
// forwarded change, whatever envelope it came in.

export type ResourceAction = "add" | "update" | "delete";

/** Identifies one Kubernetes object. `namespace` is absent for cluster-scoped objects. */
export interface ObjectReference {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}

/**
 * A Kubernetes object whose identity fields were validated; everything else
 * is passed through untouched (and unvalidated) for the function to read.
 */
export interface KubeObjectLike {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

/**
 * A change to one object. `object` is present when the sender included it
 * (ApiServerSource Resource mode, watch events): the new state for add and
 * update, the last known state for delete. Reference-mode events carry only
 * `ref`, so the function must GET the object itself.
 */
export interface ResourceEvent {
  kind: "resource";
  action: ResourceAction;
  ref: ObjectReference;
  object?: KubeObjectLike;
  /** CloudEvent id; HTTP retries of one delivery reuse it. */
  id?: string;
  /** CloudEvent source (the API server URL for ApiServerSource). */
  source?: string;
  /** metadata.resourceVersion of `object`, when it has one. */
  resourceVersion?: string;
}

/** A periodic trigger (PingSource): run a full pass. */
export interface ResyncEvent {
  kind: "resync";
  id?: string;
}

/** A well-formed event that carries no change to act on (answer 2xx). */
export interface IgnoredEvent {
  kind: "ignored";
  reason: string;
  id?: string;
}

export type ParsedEvent = ResourceEvent | ResyncEvent | IgnoredEvent;
