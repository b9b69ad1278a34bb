// kube-apiserver's generic registry semantics over the ObjectStore: create
// (uid, creationTimestamp, generateName, defaults, status reset), update with
// resourceVersion preconditions and the status subresource, the three patch
// types, graceful deletion with finalizers, and selector-filtered lists.
import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { isRecord } from "../../shared/is-record.ts";
import { rfc3339 } from "../../shared/kube/time.ts";
import { claimResizeRefusal } from "./claim-resize.ts";
import { applyDefaults } from "./defaults.ts";
import { required } from "./field-errors.ts";
import { sortMapKeys } from "./map-keys.ts";
import {
  applyPatch,
  CUSTOM_RESOURCE_PATCH_TYPES,
  PatchError,
  patchTypeOf,
  SUPPORTED_PATCH_TYPES,
} from "./patch.ts";
import { planPodDeletion } from "./pod-deletion.ts";
import {
  apiVersionOf,
  findResourceType,
  findResourceTypeByKind,
  type ResourceType,
  resourceTypes,
} from "./resources.ts";
import {
  fieldsOf,
  matchesFieldRequirements,
  matchesLabelRequirements,
  parseFieldSelectorString,
  parseLabelSelectorString,
  SelectorParseError,
  supportedFieldSelectors,
} from "./selectors.ts";
import {
  ApiError,
  alreadyExists,
  badRequest,
  conflict,
  deletePreconditionConflict,
  forbidden,
  invalid,
  namespaceNotFound,
  notFound,
} from "./status.ts";
import {
  admitStorageCreate,
  STORAGE_ADMISSION_PLUGINS,
  type StorageAdmissionPlugin,
} from "./storage-admission.ts";
import type { KubeObject, ObjectStore } from "./store.ts";
import { validateCreate, validateName, validateUpdate } from "./validation.ts";

export interface WriteOptions {
  dryRun?: boolean;
  subresource?: "status";
}

export interface DeleteOptions {
  dryRun?: boolean;
  preconditions?: { uid?: string; resourceVersion?: string };
  /** DeleteOptions.gracePeriodSeconds (pods only). */
  gracePeriodSeconds?: number;
}

export interface ListOptions {
  labelSelector?: string;
  fieldSelector?: string;
  limit?: number;
  continueToken?: string;
  /** Hand out the stored objects instead of copies (see peek). */
  shared?: boolean;
}

export interface ListResult {
  items: KubeObject[];
  resourceVersion: string;
  continueToken?: string;
  remainingItemCount?: number;
}

export interface ObjectFilter {
  matches(o: KubeObject): boolean;
}

const generateNameAlphabet = "bcdfghjklmnpqrstvwxz2456789";

function randomSuffix(): string {
  let s = "";
  for (let i = 0; i < 5; i++)
    s += generateNameAlphabet[Math.floor(Math.random() * generateNameAlphabet.length)];
  return s;
}

/** Metadata the server owns: an update cannot change it. */
const serverOwnedMeta = [
  "uid",
  "creationTimestamp",
  "namespace",
  "name",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
] as const;

const namespaceType = findResourceType("", "v1", "namespaces")!;
const podType = findResourceType("", "v1", "pods")!;

export class Registry {
  readonly store: ObjectStore;
  /**
   * Pods a node runs are only marked by a DELETE, as kube-apiserver does;
   * worth it only where kubelets finish the deletion.
   */
  gracefulPodDeletion = false;
  /** kube-apiserver's storage admission plugins in effect (all by default, as upstream). */
  admissionPlugins: ReadonlySet<StorageAdmissionPlugin> = new Set(STORAGE_ADMISSION_PLUGINS);

  constructor(store: ObjectStore) {
    this.store = store;
  }

  get(t: ResourceType, namespace: string | undefined, name: string): KubeObject {
    return structuredClone(this.peek(t, namespace, name));
  }

  /**
   * The stored object itself, for a caller that only serializes it at once
   * (a GET answer): copying every object read was a large share of the
   * sandbox's CPU under load. Never modify or keep it.
   */
  peek(t: ResourceType, namespace: string | undefined, name: string): Readonly<KubeObject> {
    const o = this.store.peek(t, namespace, name);
    if (!o) throw notFound(t, name);
    return o;
  }

  /** Compiles label and field selectors once for lists and watches. */
  filter(t: ResourceType, labelSelector?: string, fieldSelector?: string): ObjectFilter {
    try {
      const labels = labelSelector ? parseLabelSelectorString(labelSelector) : [];
      const fields = fieldSelector
        ? parseFieldSelectorString(fieldSelector, supportedFieldSelectors(t.plural))
        : [];
      return {
        matches: (o) =>
          (labels.length === 0 || matchesLabelRequirements(labels, o.metadata.labels ?? {})) &&
          (fields.length === 0 || matchesFieldRequirements(fields, fieldsOf(t.plural, o))),
      };
    } catch (e) {
      if (e instanceof SelectorParseError) throw badRequest(e.message);
      throw e;
    }
  }

  /** Items are copies unless options.shared, for a caller that only serializes them at once (as peek). */
  list(t: ResourceType, namespace: string | undefined, options: ListOptions = {}): ListResult {
    const copy = options.shared ? (o: KubeObject) => o : (o: KubeObject) => structuredClone(o);
    const filter = this.filter(t, options.labelSelector, options.fieldSelector);
    let startAfter: string | undefined;
    if (options.continueToken) {
      try {
        const token = JSON.parse(Buffer.from(options.continueToken, "base64url").toString("utf8")) as {
          start?: unknown;
        };
        if (typeof token.start !== "string") throw new Error("no start key");
        startAfter = token.start;
      } catch {
        throw badRequest("continue key is not valid: illegal base64 data or JSON");
      }
    }
    const resourceVersion = this.store.currentRevision.toString();
    let matching = this.store.peekAll(t, namespace).filter((o) => filter.matches(o));
    if (startAfter !== undefined) {
      const after = startAfter;
      matching = matching.filter((o) => keyOf(o) > after);
    }
    const limit = options.limit && options.limit > 0 ? options.limit : undefined;
    if (limit === undefined || matching.length <= limit) {
      return { items: matching.map(copy), resourceVersion };
    }
    const page = matching.slice(0, limit);
    const last = page[page.length - 1]!;
    // Upstream counts what remains only for an unfiltered list: with a selector etcd's count would be wrong.
    const filtered = Boolean(options.labelSelector || options.fieldSelector);
    return {
      items: page.map(copy),
      resourceVersion,
      continueToken: Buffer.from(JSON.stringify({ rv: resourceVersion, start: keyOf(last) })).toString(
        "base64url",
      ),
      ...(filtered ? {} : { remainingItemCount: matching.length - limit }),
    };
  }

  create(
    t: ResourceType,
    namespace: string | undefined,
    body: unknown,
    options: WriteOptions = {},
  ): KubeObject {
    const decoded = this.prepareCreate(t, namespace, body);
    this.admitCreate(t, decoded);
    return this.commitCreate(t, this.completeCreate(t, decoded), options);
  }

  /** kube-apiserver's built-in mutating admission of a decoded object (storage-admission.ts); before any webhook. */
  admitCreate(t: ResourceType, o: KubeObject): void {
    admitStorageCreate(t.plural, t.group, o, this.admissionPlugins, () => {
      const classType = findResourceType("storage.k8s.io", "v1", "storageclasses");
      return classType ? this.store.peekAll(classType, undefined) : [];
    });
  }

  // The phases of a create, public so that admission (admitted-writes.ts) can
  // run webhooks between them, as kube-apiserver does: mutating webhooks see
  // the decoded object, validating webhooks the completed one.

  /** Decodes the body and settles its namespace (which must exist). */
  prepareCreate(t: ResourceType, namespace: string | undefined, body: unknown): KubeObject {
    const o = this.decode(t, body);
    const meta = o.metadata;
    if (t.namespaced) {
      if (meta.namespace && namespace && meta.namespace !== namespace) {
        throw badRequest(
          "the namespace of the provided object does not match the namespace sent on the request",
        );
      }
      meta.namespace = namespace ?? meta.namespace;
      if (!meta.namespace)
        throw badRequest("the server could not find the requested resource: namespace is required");
      if (!this.store.peek(namespaceType, undefined, meta.namespace)) throw namespaceNotFound(meta.namespace);
    } else {
      delete meta.namespace;
    }
    return o;
  }

  /** Name (generateName), validation, uid, timestamps, initial status, defaults: the object as it would be stored. */
  completeCreate(t: ResourceType, o: KubeObject): KubeObject {
    const meta = o.metadata;
    if (!meta.name) {
      if (!meta.generateName) {
        throw invalid(t, "", [required("metadata.name", "name or generateName is required")]);
      }
      meta.name = meta.generateName + randomSuffix();
    }
    const errors = [...validateName(meta.name), ...validateCreate(t.plural, o)];
    if (errors.length > 0) throw invalid(t, meta.name, errors);

    meta.uid = randomUUID();
    meta.creationTimestamp = rfc3339(new Date());
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    if (t.statusOnCreate) o.status = t.statusOnCreate();
    applyDefaults(t.plural, o);
    return o;
  }

  /** Stores a completed object (AlreadyExists if its name was taken meanwhile); dry run stores nothing. */
  commitCreate(t: ResourceType, o: KubeObject, options: WriteOptions = {}): KubeObject {
    const meta = o.metadata;
    if (this.store.peek(t, meta.namespace, meta.name ?? "")) throw alreadyExists(t, meta.name ?? "");
    if (options.dryRun) {
      meta.resourceVersion = "";
      sortMapKeys(t, o);
      return o;
    }
    meta.resourceVersion = this.store.nextRevision().toString();
    this.store.put(t, "ADDED", o);
    return structuredClone(o);
  }

  update(
    t: ResourceType,
    namespace: string | undefined,
    name: string,
    body: unknown,
    options: WriteOptions = {},
  ): KubeObject {
    const incoming = this.decodeUpdate(t, namespace, name, body);
    const old = this.store.peek(t, namespace, name);
    if (!old) throw notFound(t, name);
    return this.commitUpdate(t, old, incoming, options);
  }

  /** An update body, checked against the name and namespace of the URL. */
  decodeUpdate(t: ResourceType, namespace: string | undefined, name: string, body: unknown): KubeObject {
    const incoming = this.decode(t, body);
    if (incoming.metadata.name && incoming.metadata.name !== name) {
      throw badRequest(
        `the name of the object (${incoming.metadata.name}) does not match the name on the URL (${name})`,
      );
    }
    if (t.namespaced && incoming.metadata.namespace && incoming.metadata.namespace !== namespace) {
      throw badRequest(
        "the namespace of the provided object does not match the namespace sent on the request",
      );
    }
    return incoming;
  }

  patch(
    t: ResourceType,
    namespace: string | undefined,
    name: string,
    contentType: string,
    patch: unknown,
    options: WriteOptions = {},
  ): KubeObject {
    const old = this.store.peek(t, namespace, name);
    if (!old) throw notFound(t, name);
    return this.commitUpdate(t, old, this.applyPatchTo(t, old, contentType, patch), options);
  }

  /** 415 unless the PATCH Content-Type is one the sandbox applies to t; checked before the object is read, as upstream. */
  checkPatchType(t: ResourceType, contentType: string): void {
    patchErrorsAsApiErrors(() => patchTypeOf(contentType, acceptedPatchTypes(t)));
  }

  /** The object a PATCH body turns `old` into (decoded, not yet built into an update). */
  applyPatchTo(t: ResourceType, old: KubeObject, contentType: string, patch: unknown): KubeObject {
    const patched = patchErrorsAsApiErrors(() =>
      applyPatch(contentType, old, patch, t.plural, acceptedPatchTypes(t)),
    );
    return this.decode(t, patched);
  }

  /** DeleteOptions.preconditions against the stored object (409 Conflict, worded as rest.BeforeDelete). */
  checkDeletePreconditions(t: ResourceType, old: KubeObject, pre: DeleteOptions["preconditions"]): void {
    const name = old.metadata.name ?? "";
    if (pre?.uid && pre.uid !== old.metadata.uid) {
      throw deletePreconditionConflict(
        t,
        name,
        `the UID in the precondition (${pre.uid}) does not match the UID in record (${old.metadata.uid ?? ""}). The object might have been deleted and then recreated`,
      );
    }
    if (pre?.resourceVersion && pre.resourceVersion !== old.metadata.resourceVersion) {
      throw deletePreconditionConflict(
        t,
        name,
        `the ResourceVersion in the precondition (${pre.resourceVersion}) does not match the ResourceVersion in record (${old.metadata.resourceVersion ?? ""}). The object might have been modified`,
      );
    }
  }

  delete(
    t: ResourceType,
    namespace: string | undefined,
    name: string,
    options: DeleteOptions = {},
  ): KubeObject {
    const old = this.store.peek(t, namespace, name);
    if (!old) throw notFound(t, name);
    this.checkDeletePreconditions(t, old, options.preconditions);
    const o = structuredClone(old);
    if (t === podType && this.gracefulPodDeletion) {
      const plan = planPodDeletion(old, options.gracePeriodSeconds, Date.now());
      if (plan.kind === "pending") return o;
      if (plan.kind === "mark" || (o.metadata.finalizers ?? []).length > 0) {
        o.metadata.deletionTimestamp =
          plan.kind === "mark"
            ? plan.deletionTimestamp
            : (o.metadata.deletionTimestamp ?? rfc3339(new Date()));
        o.metadata.deletionGracePeriodSeconds = plan.kind === "mark" ? plan.gracePeriodSeconds : 0;
        if (options.dryRun || isDeepStrictEqual(o, old)) return o;
        o.metadata.resourceVersion = this.store.nextRevision().toString();
        this.store.put(t, "MODIFIED", o);
        return structuredClone(o);
      }
    }
    if ((o.metadata.finalizers ?? []).length > 0) {
      // Graceful deletion: the object stays, marked, until its last finalizer goes.
      if (o.metadata.deletionTimestamp) return o;
      o.metadata.deletionTimestamp = rfc3339(new Date());
      o.metadata.deletionGracePeriodSeconds = 0;
      if (options.dryRun) return o;
      o.metadata.resourceVersion = this.store.nextRevision().toString();
      this.store.put(t, "MODIFIED", o);
      return structuredClone(o);
    }
    if (options.dryRun) return o;
    if (t === namespaceType) this.deleteNamespaceContents(name);
    o.metadata.resourceVersion = this.store.nextRevision().toString();
    this.store.remove(t, namespace, name, o);
    return structuredClone(o);
  }

  /** Objects seeded as they are (uid, status, resourceVersion stamped fresh): the test hook. */
  seed(body: unknown): KubeObject {
    if (!isRecord(body) || typeof body.apiVersion !== "string" || typeof body.kind !== "string") {
      throw badRequest("seeded objects need apiVersion and kind");
    }
    const t = findResourceTypeByKind(body.apiVersion, body.kind);
    if (!t) throw badRequest(`unknown kind ${body.apiVersion}/${body.kind}`);
    const o = this.decode(t, body);
    if (!o.metadata.name) throw badRequest("seeded objects need metadata.name");
    if (t.namespaced) o.metadata.namespace ??= "default";
    o.metadata.uid ??= randomUUID();
    o.metadata.creationTimestamp ??= rfc3339(new Date());
    applyDefaults(t.plural, o);
    const existed = this.store.peek(t, o.metadata.namespace, o.metadata.name) !== undefined;
    o.metadata.resourceVersion = this.store.nextRevision().toString();
    this.store.put(t, existed ? "MODIFIED" : "ADDED", o);
    return structuredClone(o);
  }

  private commitUpdate(
    t: ResourceType,
    old: KubeObject,
    incoming: KubeObject,
    options: WriteOptions,
  ): KubeObject {
    const next = this.buildUpdate(t, old, incoming, options);
    this.checkUpdate(t, next, old, options.subresource);
    return this.storeUpdate(t, old, next, options);
  }

  // The phases of an update, public for admission like those of create.

  /** Decodes an update or patch body for type t (apiVersion/kind checked). */
  decodeBody(t: ResourceType, body: unknown): KubeObject {
    return this.decode(t, body);
  }

  /**
   * What an update would store: preconditions (resourceVersion, uid) checked
   * against `old`, server-owned metadata kept, status or everything-but-status
   * taken from `incoming`, defaults applied. Not validated yet.
   */
  buildUpdate(
    t: ResourceType,
    old: KubeObject,
    incoming: KubeObject,
    options: WriteOptions = {},
  ): KubeObject {
    const name = old.metadata.name ?? "";
    const rv = incoming.metadata.resourceVersion;
    if (rv && rv !== old.metadata.resourceVersion) throw conflict(t, name);
    const uid = incoming.metadata.uid;
    if (uid && uid !== old.metadata.uid) {
      throw conflict(
        t,
        name,
        `Precondition failed: UID in precondition: ${uid}, UID in object meta: ${old.metadata.uid}`,
      );
    }

    let next: KubeObject;
    if (options.subresource === "status") {
      // Status writes change status; kube resets spec, and metadata too except for the core types,
      // whose status strategies (nodes, pods, PVs, claims) let labels and annotations through.
      next = structuredClone(old);
      if (incoming.status === undefined) delete next.status;
      else next.status = structuredClone(incoming.status);
      if (t.group === "") {
        for (const key of ["labels", "annotations"] as const) {
          if (incoming.metadata[key] === undefined) delete next.metadata[key];
          else next.metadata[key] = structuredClone(incoming.metadata[key]);
        }
      }
    } else {
      next = incoming;
      if (t.hasStatus) {
        if (old.status === undefined) delete next.status;
        else next.status = structuredClone(old.status);
      }
      // Fields the server owns.
      const m: Record<string, unknown> = next.metadata;
      for (const key of serverOwnedMeta) {
        if (old.metadata[key] === undefined) delete m[key];
        else m[key] = old.metadata[key];
      }
      if (next.metadata.finalizers?.length === 0) delete m.finalizers;
      applyDefaults(t.plural, next);
    }
    next.apiVersion = apiVersionOf(t);
    next.kind = t.kind;
    next.metadata.resourceVersion = old.metadata.resourceVersion;
    return next;
  }

  /**
   * The update validation (422 Invalid), then the built-in validating
   * admission plugins kube-apiserver runs before any webhook (403 Forbidden).
   */
  checkUpdate(t: ResourceType, next: KubeObject, old: KubeObject, subresource?: "status"): void {
    const errors = validateUpdate(t.plural, next, old, subresource);
    if (errors.length > 0) throw invalid(t, old.metadata.name ?? "", errors);
    if (subresource === undefined) this.checkBuiltInAdmission(t, next, old);
  }

  private checkBuiltInAdmission(t: ResourceType, next: KubeObject, old: KubeObject): void {
    if (t.group !== "" || t.plural !== "persistentvolumeclaims") return;
    if (!this.admissionPlugins.has("PersistentVolumeClaimResize")) return;
    const refusal = claimResizeRefusal(next, old, (name) => {
      const classType = findResourceType("storage.k8s.io", "v1", "storageclasses");
      return classType ? this.store.peek(classType, undefined, name) : undefined;
    });
    if (refusal !== undefined) throw forbidden(t, old.metadata.name ?? "", refusal);
  }

  /** Stores a built and checked update of `old`, which must still be the stored version. */
  storeUpdate(t: ResourceType, old: KubeObject, next: KubeObject, options: WriteOptions = {}): KubeObject {
    const name = old.metadata.name ?? "";
    // Compared as it would be stored (an empty map is no change), as upstream compares encoded objects.
    sortMapKeys(t, next);
    // A no-op write is not a write: same resourceVersion, no watch event (as etcd-backed kube does).
    if (isDeepStrictEqual(next, old)) return structuredClone(old);
    if (options.dryRun) return next;

    next.metadata.resourceVersion = this.store.nextRevision().toString();
    const grace = old.metadata.deletionGracePeriodSeconds;
    if (next.metadata.deletionTimestamp && (next.metadata.finalizers ?? []).length === 0 && !grace) {
      // The last finalizer is gone from an object being deleted: it goes now. A pod still in its
      // grace period stays, as upstream's, until its kubelet's final DELETE.
      this.store.remove(t, next.metadata.namespace, name, next);
    } else {
      this.store.put(t, "MODIFIED", next);
    }
    return structuredClone(next);
  }

  /** Parses a request body into an object of type t, checking apiVersion/kind when given. */
  private decode(t: ResourceType, body: unknown): KubeObject {
    if (!isRecord(body)) throw badRequest("the body of the request must be a JSON object");
    const o = structuredClone(body) as KubeObject;
    const expected = apiVersionOf(t);
    if (o.apiVersion !== undefined && o.apiVersion !== expected) {
      throw badRequest(
        `the API version in the data (${String(o.apiVersion)}) does not match the expected API version (${expected})`,
      );
    }
    if (o.kind !== undefined && o.kind !== t.kind) {
      throw badRequest(
        `the kind in the data (${String(o.kind)}) does not match the expected kind (${t.kind})`,
      );
    }
    if (o.metadata === undefined) o.metadata = {};
    if (!isRecord(o.metadata)) throw badRequest("metadata must be an object");
    o.apiVersion = expected;
    o.kind = t.kind;
    return o;
  }

  private deleteNamespaceContents(ns: string): void {
    for (const t of namespacedTypes()) {
      for (const o of this.store.peekAll(t, ns)) {
        const last = structuredClone(o);
        last.metadata.resourceVersion = this.store.nextRevision().toString();
        this.store.remove(t, ns, o.metadata.name ?? "", last);
      }
    }
  }
}

function acceptedPatchTypes(t: ResourceType): readonly string[] {
  return t.customResource ? CUSTOM_RESOURCE_PATCH_TYPES : SUPPORTED_PATCH_TYPES;
}

function patchErrorsAsApiErrors<T>(apply: () => T): T {
  try {
    return apply();
  } catch (e) {
    if (e instanceof PatchError) {
      const reason = e.code === 422 ? "Invalid" : e.code === 415 ? "UnsupportedMediaType" : "BadRequest";
      throw new ApiError(e.code, reason, e.message);
    }
    throw e;
  }
}

function keyOf(o: KubeObject): string {
  return o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : (o.metadata.name ?? "");
}

function namespacedTypes(): ResourceType[] {
  return resourceTypes.filter((t) => t.namespaced);
}
