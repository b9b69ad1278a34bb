// POST pods/<name>/binding: how a scheduler assigns a pod to a node. As
// kube-apiserver's BindingREST: the Binding's name must be the pod's, its
// target a Node; a pod already assigned or being deleted is a 409 Conflict;
// the pod gets spec.nodeName, the Binding's annotations and PodScheduled=True
// in one write.

import { isRecord } from "../../shared/is-record.ts";
import { rfc3339 } from "../../shared/kube/time.ts";
import type { Registry } from "./registry.ts";
import { findResourceType } from "./resources.ts";
import { ApiError, badRequest, conflict } from "./status.ts";
import type { KubeObject } from "./store.ts";

const podType = findResourceType("", "v1", "pods")!;
/** Errors name the subresource, as kube-apiserver's do. */
const bindingType = { ...podType, plural: "pods/binding" };

function stringMap(v: unknown): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isRecord(v) || !Object.values(v).every((x) => typeof x === "string")) {
    throw badRequest("metadata.annotations of the Binding must map strings to strings");
  }
  return v as Record<string, string>;
}

/** Binds; answers the metav1.Status kube-apiserver sends (201 Success). */
export function bindPod(
  registry: Registry,
  namespace: string,
  podName: string,
  body: unknown,
  dryRun: boolean,
): Record<string, unknown> {
  if (!isRecord(body)) throw badRequest("the body of the request must be a JSON object");
  if (body.kind !== undefined && body.kind !== "Binding") {
    throw badRequest(
      `the kind in the data (${String(body.kind)}) does not match the expected kind (Binding)`,
    );
  }
  const meta = isRecord(body.metadata) ? body.metadata : {};
  if (meta.name !== podName) throw badRequest("name in URL does not match name in Binding object");
  const target = isRecord(body.target) ? body.target : {};
  const causes: { field: string; message: string }[] = [];
  if (target.kind !== undefined && target.kind !== "" && target.kind !== "Node") {
    causes.push({
      field: "target.kind",
      message: `Invalid value: ${JSON.stringify(target.kind)}: must be empty or 'Node'`,
    });
  }
  if (typeof target.name !== "string" || target.name === "") {
    causes.push({ field: "target.name", message: "Required value" });
  }
  if (causes.length > 0) {
    throw new ApiError(
      422,
      "Invalid",
      `Binding "${podName}" is invalid: ${causes.map((c) => `${c.field}: ${c.message}`).join(", ")}`,
      {
        name: podName,
        kind: "Binding",
        causes: causes.map((c) => ({
          reason: c.message === "Required value" ? "FieldValueRequired" : "FieldValueInvalid",
          ...c,
        })),
      },
    );
  }
  const annotations = stringMap(meta.annotations);

  const old = registry.peek(podType, namespace, podName) as KubeObject;
  const refuse = (why: string): ApiError => conflict(bindingType, podName, why);
  if (typeof meta.uid === "string" && meta.uid !== "" && meta.uid !== old.metadata.uid) {
    throw refuse(
      `Precondition failed: UID in precondition: ${meta.uid}, UID in object meta: ${old.metadata.uid}`,
    );
  }
  if (
    typeof meta.resourceVersion === "string" &&
    meta.resourceVersion !== "" &&
    meta.resourceVersion !== old.metadata.resourceVersion
  ) {
    throw conflict(podType, podName);
  }
  if (old.metadata.deletionTimestamp) {
    throw refuse(`pod ${podName} is being deleted, cannot be assigned to a host`);
  }
  const spec = isRecord(old.spec) ? old.spec : {};
  if (typeof spec.nodeName === "string" && spec.nodeName !== "") {
    throw refuse(`pod ${podName} is already assigned to node "${spec.nodeName}"`);
  }
  if (Array.isArray(spec.schedulingGates) && spec.schedulingGates.length > 0) {
    throw refuse(`pod ${podName} has non-empty .spec.schedulingGates`);
  }

  const next = structuredClone(old);
  next.spec = { ...(isRecord(next.spec) ? next.spec : {}), nodeName: target.name };
  if (annotations) next.metadata.annotations = { ...next.metadata.annotations, ...annotations };
  const status = isRecord(next.status) ? next.status : {};
  const conditions = Array.isArray(status.conditions) ? (status.conditions as Record<string, unknown>[]) : [];
  const scheduled = {
    type: "PodScheduled",
    status: "True",
    lastProbeTime: null,
    lastTransitionTime: rfc3339(new Date()),
  };
  const at = conditions.findIndex((c) => isRecord(c) && c.type === "PodScheduled");
  if (at < 0) conditions.push(scheduled);
  else if (conditions[at]!.status !== "True") conditions[at] = scheduled;
  next.status = { ...status, conditions };
  registry.storeUpdate(podType, old, next, { dryRun });
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", code: 201 };
}
