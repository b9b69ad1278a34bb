// One observed change to one object, as the delivery queues carry it, and
// the rule for folding a newer change of the same object into an older one
// that has not been delivered yet.

import { randomUUID } from "node:crypto";
import type { ResourceAction } from "../events/index.ts";
import type { ResourceDescriptor } from "../kube/resources.ts";
import type { KubeObject } from "../kube/types.ts";

export interface Change {
  /** The CloudEvent id: new per change, reused by every retry of its delivery. */
  id: string;
  action: ResourceAction;
  resource: ResourceDescriptor;
  /** New state for add/update, last known state for delete. */
  object: KubeObject;
  /** Orders deliveries: kind, namespace and name (not uid, so delete-then-recreate stays in order). */
  key: string;
}

export function newChange(action: ResourceAction, resource: ResourceDescriptor, object: KubeObject): Change {
  return { id: randomUUID(), action, resource, object, key: objectKey(resource, object) };
}

export function objectKey(resource: ResourceDescriptor, object: KubeObject): string {
  return `${resource.kind}/${object.metadata.namespace ?? ""}/${object.metadata.name}`;
}

/**
 * `newer` folded into `older`, or undefined when the two must both be sent.
 *
 * Every event carries the whole object, and receivers re-read and compare
 * resourceVersions anyway, so an undelivered state that a newer one replaces
 * tells them nothing more. Not folded:
 * - anything after a delete: the receiver must see the object go before a
 *   recreated one with the same name appears;
 * - different uids: a different object instance (recreated in between).
 * An add stays an add (the receiver never heard of the object); anything
 * followed by a delete becomes that delete. The result takes the newer id:
 * it is a different event from the one a retry may already have sent.
 */
export function coalesce(older: Change, newer: Change): Change | undefined {
  if (older.key !== newer.key || older.action === "delete") return undefined;
  const a = older.object.metadata.uid;
  const b = newer.object.metadata.uid;
  if (a !== undefined && b !== undefined && a !== b) return undefined;
  const action = newer.action === "delete" ? "delete" : older.action === "add" ? "add" : newer.action;
  return { ...newer, action };
}
