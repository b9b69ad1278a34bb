// Dynamic admission in the sandbox API server: the Mutating- and
// ValidatingWebhookConfigurations stored in the sandbox are called like
// kube-apiserver calls them, so the admission function (and anyone's webhook)
// can be tried end to end against the sandbox.
//
// As upstream:
//   - mutating webhooks run one after another, configurations sorted by name,
//     each seeing the previous one's patches; validating webhooks run in
//     parallel on the final object, after the registry's own validation;
//   - a denial becomes a Status with the webhook's code (at least 400) and
//     reason, and the message `admission webhook "<name>" denied the request: <message>`;
//   - a failed call (connection, TLS against caBundle, timeoutSeconds,
//     malformed answer) fails the request with 500 InternalError
//     `failed calling webhook "<name>": ...` under failurePolicy Fail (the
//     default) and is skipped under Ignore;
//   - a dry-run request only goes to webhooks with sideEffects None or
//     NoneOnDryRun; any other matching webhook fails it with 400;
//   - writes to webhook configurations themselves are never admitted, so a
//     broken webhook cannot lock its own fix out.
// Not modelled (noted here so nobody relies on it): reinvocationPolicy
// IfNeeded (mutating webhooks run once), matchConditions (treated as true),
// matchPolicy Equivalent, auditAnnotations, AdmissionReview v1beta1.

import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import {
  type AdmissionResponse,
  type AdmissionStatus,
  callWebhook,
  WebhookCallError,
} from "./admission-call.ts";
import {
  type MatchAttributes,
  type RegisteredWebhook,
  type Webhook,
  webhookMatches,
  webhooksOf,
} from "./admission-rules.ts";
import { applyPatch, JSON_PATCH, PatchError } from "./patch.ts";
import { findResourceType, type ResourceType } from "./resources.ts";
import { ApiError } from "./status.ts";
import type { KubeObject, ObjectStore } from "./store.ts";
import type { ServiceMap } from "./webhook-services.ts";

export interface UserInfo {
  username: string;
  uid?: string;
  groups?: string[];
}

export interface AdmissionAttributes extends MatchAttributes {
  operation: "CREATE" | "UPDATE" | "DELETE";
  /** "" for a create with generateName (the name is not known yet). */
  name: string;
  dryRun: boolean;
  userInfo: UserInfo;
  /** Filled with the webhooks' warnings, for the answer's Warning headers. */
  warnings: string[];
}

const mutatingType = findResourceType("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")!;
const validatingType = findResourceType(
  "admissionregistration.k8s.io",
  "v1",
  "validatingwebhookconfigurations",
)!;
const namespaceType = findResourceType("", "v1", "namespaces")!;

/** A webhook's denial: its Status, with an empty reason left out as the Go client would. */
class WebhookDenied extends ApiError {
  override toStatus(): Record<string, unknown> {
    const status = super.toStatus();
    if (this.reason === "") delete status.reason;
    return status;
  }
}

/** upstream's webhookerrors.ToStatusErr */
function denied(name: string, result: AdmissionStatus | undefined): ApiError {
  const by = `admission webhook "${name}" denied the request`;
  const code =
    typeof result?.code === "number" && result.code >= 400 && result.code <= 599 ? result.code : 400;
  const message = result?.message
    ? `${by}: ${result.message}`
    : result?.reason
      ? `${by}: ${result.reason}`
      : `${by} without explanation`;
  return new WebhookDenied(code, typeof result?.reason === "string" ? result.reason : "", message);
}

function internalError(message: string): ApiError {
  return new ApiError(500, "InternalError", `Internal error occurred: ${message}`, { causes: [{ message }] });
}

function optionsKind(operation: AdmissionAttributes["operation"]): string {
  return operation === "CREATE"
    ? "CreateOptions"
    : operation === "UPDATE"
      ? "UpdateOptions"
      : "DeleteOptions";
}

/**
 * The object as kube-apiserver serializes it. Go writes an unset
 * metav1.Time as null and a status struct even when empty, so an object
 * not stored yet (a CREATE before the registry completed it) has
 * `creationTimestamp: null` and, where the kind has one, a status (the
 * defaulted one on CREATE). Webhooks get this form and their patches apply
 * to it.
 */
function wireObject(attrs: AdmissionAttributes, object: KubeObject | undefined): KubeObject | undefined {
  if (object === undefined) return undefined;
  const noTimestamp = object.metadata.creationTimestamp === undefined;
  const noStatus = attrs.type.hasStatus && object.status === undefined;
  if (!noTimestamp && !noStatus) return object;
  const status = attrs.operation === "CREATE" ? (attrs.type.statusOnCreate?.() ?? {}) : {};
  return {
    ...object,
    metadata: noTimestamp ? { ...object.metadata, creationTimestamp: null } : object.metadata,
    ...(noStatus ? { status } : {}),
  } as unknown as KubeObject;
}

/** Back from the wire: what wireObject added and the webhook left alone goes again (null is unset to Go). */
function fromWire(patched: KubeObject, before: KubeObject, sent: KubeObject): KubeObject {
  if ((patched.metadata.creationTimestamp as unknown) === null) delete patched.metadata.creationTimestamp;
  if (before.status === undefined && isDeepStrictEqual(patched.status, sent.status)) delete patched.status;
  return patched;
}

/** An AdmissionReview v1 request, member for member as kube-apiserver writes one. */
function reviewOf(uid: string, attrs: AdmissionAttributes): object {
  const t = attrs.type;
  const kind = { group: t.group, version: t.version, kind: t.kind };
  const resource = { group: t.group, version: t.version, resource: t.plural };
  return {
    kind: "AdmissionReview",
    apiVersion: "admission.k8s.io/v1",
    request: {
      uid,
      kind,
      resource,
      ...(attrs.subresource ? { subResource: attrs.subresource } : {}),
      requestKind: kind,
      requestResource: resource,
      ...(attrs.subresource ? { requestSubResource: attrs.subresource } : {}),
      ...(attrs.name ? { name: attrs.name } : {}),
      ...(attrs.namespace ? { namespace: attrs.namespace } : {}),
      operation: attrs.operation,
      userInfo: attrs.userInfo,
      object: wireObject(attrs, attrs.object) ?? null,
      oldObject: attrs.oldObject ?? null,
      dryRun: attrs.dryRun,
      options: {
        kind: optionsKind(attrs.operation),
        apiVersion: "meta.k8s.io/v1",
        ...(attrs.dryRun ? { dryRun: ["All"] } : {}),
      },
    },
  };
}

export class WebhookAdmission {
  private readonly store: ObjectStore;
  private readonly services: ServiceMap;
  /** Calls that failed under failurePolicy Ignore, for tests and the curious (GET /_sandbox/admission). */
  readonly ignoredFailures: { webhook: string; error: string }[] = [];

  constructor(store: ObjectStore, services: ServiceMap) {
    this.store = store;
    this.services = services;
  }

  /** Cheap test for the common case: no webhook is registered, or t is a webhook configuration. */
  active(t: ResourceType): boolean {
    if (t === mutatingType || t === validatingType) return false;
    return this.store.peekAll(mutatingType).length > 0 || this.store.peekAll(validatingType).length > 0;
  }

  /** Runs the matching mutating webhooks in order; returns the (patched) object. */
  async mutate(attrs: AdmissionAttributes): Promise<KubeObject | undefined> {
    let object = attrs.object;
    for (const { webhook } of webhooksOf(this.store.peekAll(mutatingType))) {
      const current = { ...attrs, object };
      if (!this.matches(webhook, current)) continue;
      const response = await this.call(webhook, current, true);
      if (response === undefined) continue;
      if (!response.allowed) throw denied(webhook.name ?? "", response.status);
      // There is no object to patch on DELETE; upstream has nothing to apply it to either.
      // The patch applies to the object as the webhook saw it.
      const sent = wireObject(current, object);
      if (response.patch !== undefined && sent !== undefined && object !== undefined)
        object = fromWire(
          this.applyWebhookPatch(webhook.name ?? "", attrs.type, sent, response.patch),
          object,
          sent,
        );
    }
    return object;
  }

  /** Runs the matching validating webhooks in parallel; throws the first (in order) denial or failure. */
  async validate(attrs: AdmissionAttributes): Promise<void> {
    const hooks = webhooksOf(this.store.peekAll(validatingType)).filter(({ webhook }) =>
      this.matches(webhook, attrs),
    );
    const outcomes = await Promise.allSettled(
      hooks.map(async ({ webhook }: RegisteredWebhook) => {
        const response = await this.call(webhook, attrs, false);
        if (response !== undefined && !response.allowed) throw denied(webhook.name ?? "", response.status);
      }),
    );
    for (const outcome of outcomes) if (outcome.status === "rejected") throw outcome.reason;
  }

  private matches(webhook: Webhook, attrs: AdmissionAttributes): boolean {
    return webhookMatches(
      webhook,
      attrs,
      (name) => this.store.peek(namespaceType, undefined, name)?.metadata.labels,
    );
  }

  /** One call with upstream's dry-run and failurePolicy rules; undefined when an ignored failure skips it. */
  private async call(
    webhook: Webhook,
    attrs: AdmissionAttributes,
    mutating: boolean,
  ): Promise<AdmissionResponse | undefined> {
    const name = webhook.name ?? "";
    if (attrs.dryRun && webhook.sideEffects !== "None" && webhook.sideEffects !== "NoneOnDryRun")
      throw new ApiError(400, "BadRequest", `admission webhook "${name}" does not support dry run`);
    const uid = randomUUID();
    try {
      if (webhook.admissionReviewVersions && !webhook.admissionReviewVersions.includes("v1"))
        throw new WebhookCallError(
          `webhook does not accept known AdmissionReview versions (the sandbox speaks v1), got ${JSON.stringify(webhook.admissionReviewVersions)}`,
        );
      const response = await callWebhook({
        clientConfig: webhook.clientConfig,
        services: this.services,
        timeoutSeconds: webhook.timeoutSeconds,
        review: reviewOf(uid, attrs),
        uid,
        mutating,
      });
      attrs.warnings.push(...(response.warnings ?? []));
      return response;
    } catch (err) {
      if (!(err instanceof WebhookCallError)) throw err;
      if (webhook.failurePolicy === "Ignore") {
        this.ignoredFailures.push({ webhook: name, error: err.message });
        if (this.ignoredFailures.length > 100) this.ignoredFailures.shift();
        return undefined;
      }
      throw internalError(`failed calling webhook "${name}": ${err.message}`);
    }
  }

  private applyWebhookPatch(name: string, t: ResourceType, object: KubeObject, patch: string): KubeObject {
    let operations: unknown;
    try {
      operations = JSON.parse(Buffer.from(patch, "base64").toString("utf8"));
    } catch (err) {
      throw internalError(
        `admission webhook "${name}" returned a patch that is not JSON: ${(err as Error).message}`,
      );
    }
    try {
      // The registry decodes the result again (apiVersion, kind, metadata) before using it.
      return applyPatch(JSON_PATCH, object, operations, t.plural) as KubeObject;
    } catch (err) {
      if (!(err instanceof PatchError)) throw err;
      throw internalError(`admission webhook "${name}" returned a patch that does not apply: ${err.message}`);
    }
  }
}
