// Writes that go through admission webhooks: the registry's phases with the
// webhook calls in between, in kube-apiserver's order.
//
//   create:  decode -> built-in mutating plugins -> mutating webhooks -> name, validation, defaults -> validating webhooks -> store
//   update:  old + body/patch -> mutating webhooks -> validation -> validating webhooks -> store
//   delete:  preconditions -> mutating and validating webhooks (object null, oldObject the stored one) -> delete
//
// Webhook calls take time during which other writes may land. Like
// GuaranteedUpdate upstream, an update whose base moved meanwhile is redone
// on the new base (the patch or body applied again, webhooks called again);
// a resourceVersion precondition in the request turns that into 409 Conflict.
//
// Not admitted: the objects a Namespace deletion removes with it (upstream's
// namespace controller deletes them through the API, so webhooks would see
// those DELETEs), and objects seeded through /_sandbox/seed.

import type { AdmissionAttributes, UserInfo, WebhookAdmission } from "./admission.ts";
import { applyDefaults } from "./defaults.ts";
import type { DeleteOptions, Registry, WriteOptions } from "./registry.ts";
import type { ResourceType } from "./resources.ts";
import { conflict, notFound } from "./status.ts";
import type { KubeObject } from "./store.ts";

/** Who asks, and where the webhooks' warnings go. */
export interface AdmissionContext {
  userInfo: UserInfo;
  warnings: string[];
}

const MAX_UPDATE_ATTEMPTS = 5;

function isNamespaceType(t: ResourceType): boolean {
  return t.group === "" && t.plural === "namespaces";
}

/** The namespace admission sees: the object's, or a Namespace's own name. */
function admissionNamespace(
  t: ResourceType,
  namespace: string | undefined,
  name: string,
): string | undefined {
  return isNamespaceType(t) ? name : t.namespaced ? namespace : undefined;
}

export class AdmittedWrites {
  private readonly registry: Registry;
  private readonly admission: WebhookAdmission;

  constructor(registry: Registry, admission: WebhookAdmission) {
    this.registry = registry;
    this.admission = admission;
  }

  active(t: ResourceType): boolean {
    return this.admission.active(t);
  }

  private attributes(
    base: Omit<AdmissionAttributes, "userInfo" | "warnings">,
    ctx: AdmissionContext,
  ): AdmissionAttributes {
    return { ...base, userInfo: ctx.userInfo, warnings: ctx.warnings };
  }

  async create(
    t: ResourceType,
    namespace: string | undefined,
    body: unknown,
    options: WriteOptions,
    ctx: AdmissionContext,
  ): Promise<KubeObject> {
    const decoded = this.registry.prepareCreate(t, namespace, body);
    // Webhooks see the object with defaults, as they would after kube's decoding.
    applyDefaults(t.plural, decoded);
    this.registry.admitCreate(t, decoded);
    const name = decoded.metadata.name ?? "";
    const ns = admissionNamespace(t, decoded.metadata.namespace, name);
    const common = {
      operation: "CREATE" as const,
      type: t,
      subresource: undefined,
      namespace: ns,
      name,
      dryRun: options.dryRun === true,
    };
    const mutated = await this.admission.mutate(
      this.attributes({ ...common, object: decoded, oldObject: undefined }, ctx),
    );
    // Patched objects are decoded and checked again: a webhook may not move it to another namespace.
    const completed = this.registry.completeCreate(t, this.registry.prepareCreate(t, namespace, mutated));
    await this.admission.validate(
      this.attributes(
        { ...common, name: completed.metadata.name ?? "", object: completed, oldObject: undefined },
        ctx,
      ),
    );
    return this.registry.commitCreate(t, completed, options);
  }

  /**
   * An update (PUT) or patch: `incoming(old)` yields the requested object from
   * the stored one (the body, or the patch applied to it).
   */
  async update(
    t: ResourceType,
    namespace: string | undefined,
    name: string,
    incoming: (old: KubeObject) => KubeObject,
    options: WriteOptions,
    ctx: AdmissionContext,
  ): Promise<KubeObject> {
    for (let attempt = 1; ; attempt++) {
      const old = this.registry.get(t, namespace, name);
      const built = this.registry.buildUpdate(t, old, incoming(old), options);
      const common = {
        operation: "UPDATE" as const,
        type: t,
        subresource: options.subresource,
        namespace: admissionNamespace(t, namespace, name),
        name,
        dryRun: options.dryRun === true,
        oldObject: old,
      };
      const mutated = await this.admission.mutate(this.attributes({ ...common, object: built }, ctx));
      // Rebuilt so that server-owned metadata (and, for /status, everything but status) stays as stored.
      const next =
        mutated === built || mutated === undefined
          ? built
          : this.registry.buildUpdate(t, old, this.registry.decodeBody(t, mutated), options);
      this.registry.checkUpdate(t, next, old, options.subresource);
      await this.admission.validate(this.attributes({ ...common, object: next }, ctx));
      const stored = this.registry.store.peek(t, namespace, name);
      if (stored === undefined) throw notFound(t, name);
      if (stored.metadata.resourceVersion === old.metadata.resourceVersion)
        return this.registry.storeUpdate(t, stored, next, options);
      // Someone wrote while the webhooks ran: redo on the new version.
      if (attempt >= MAX_UPDATE_ATTEMPTS) throw conflict(t, name);
    }
  }

  async delete(
    t: ResourceType,
    namespace: string | undefined,
    name: string,
    options: DeleteOptions,
    ctx: AdmissionContext,
  ): Promise<KubeObject> {
    const old = this.registry.get(t, namespace, name);
    this.registry.checkDeletePreconditions(t, old, options.preconditions);
    const attrs = this.attributes(
      {
        operation: "DELETE",
        type: t,
        subresource: undefined,
        namespace: admissionNamespace(t, namespace, name),
        name,
        dryRun: options.dryRun === true,
        object: undefined,
        oldObject: old,
      },
      ctx,
    );
    await this.admission.mutate(attrs);
    await this.admission.validate(attrs);
    // Delete re-reads and re-checks the preconditions against what is stored now.
    return this.registry.delete(t, namespace, name, options);
  }
}
