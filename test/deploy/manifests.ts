// Reads deploy/ the way `kubectl apply -k deploy/` would see it: every file
// kustomization.yaml lists, split into documents, with the kustomization's
// namespace applied to namespaced objects that name none, and the components
// asked for added in order: their resources, then their patches. kustomize
// may not be installed, so only the patch forms deploy/components uses are
// read (RFC 6902 operations, `$patch: delete` of whole objects, a
// ClusterRole's rules and webhooks deleted by name); anything else fails loudly.

import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, normalize, relative } from "node:path";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { isRecord } from "../../shared/is-record.ts";
import { permissionKey, REPO } from "./code-rbac.ts";

export const DEPLOY = join(REPO, "deploy");

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  /** The file it came from, for messages. */
  file: string;
  [key: string]: unknown;
}

export interface Kustomization {
  apiVersion?: string;
  kind?: string;
  namespace?: string;
  resources?: string[];
  components?: string[];
  patches?: PatchRef[];
  images?: { name: string; newName?: string; newTag?: string }[];
}

/** A kustomization's `patches` entry: a file (or inline text) of JSON patch operations and what it applies to. */
export interface PatchRef {
  path?: string;
  patch?: string;
  target?: { group?: string; version?: string; kind?: string; name?: string };
}

/** Kinds that are not namespaced (the ones deploy/ uses). */
const CLUSTER_SCOPED = new Set([
  "Namespace",
  "ClusterRole",
  "ClusterRoleBinding",
  "MutatingWebhookConfiguration",
  "ValidatingWebhookConfiguration",
]);

/** Parses one YAML file into its documents; a YAML error fails loudly with the file name. */
export function yamlDocuments(path: string): unknown[] {
  const docs = parseAllDocuments(readFileSync(path, "utf8"));
  const list = Array.isArray(docs) ? docs : [docs];
  return list.map((doc, i) => {
    if (doc.errors.length > 0) throw new Error(`${path} document ${i + 1}: ${doc.errors[0]?.message}`);
    return doc.toJS();
  });
}

/** The kustomization (or Component) in `dir`, relative to deploy/ ("" for deploy/ itself). */
export function readKustomization(dir = ""): Kustomization {
  const value: unknown = parseYaml(readFileSync(join(DEPLOY, dir, "kustomization.yaml"), "utf8"));
  if (!isRecord(value)) throw new Error(`deploy/${dir}kustomization.yaml is not a mapping`);
  return value as Kustomization;
}

/** How loadManifests treats a component's patch whose target matches no object. */
export interface LoadOptions {
  /**
   * kustomize accepts such a patch silently; by default it fails here, so a
   * stale name shows. Given a list, each unmatched patch is named in it instead
   * (for combinations where a patch aims at another component's objects).
   */
  unmatched?: string[];
}

/**
 * The objects of deploy/ as applied by default, or, with `components`, as
 * applied with those components (paths relative to deploy/) added in order,
 * each component's resources in the parent's namespace.
 */
export function loadManifests(components: readonly string[] = [], options: LoadOptions = {}): Manifest[] {
  const kustomization = readKustomization();
  let out = readResources(kustomization.resources ?? [], kustomization.namespace);
  for (const dir of components) out = applyComponent(out, dir, kustomization.namespace, options);
  return out;
}

/** One component on the objects so far: its resources, then the components it lists, then its own patches. */
function applyComponent(
  objects: Manifest[],
  dir: string,
  namespace: string | undefined,
  options: LoadOptions,
): Manifest[] {
  const component = readKustomization(dir);
  let out = [
    ...objects,
    ...readResources(
      (component.resources ?? []).map((f) => join(dir, f)),
      namespace,
    ),
  ];
  for (const nested of component.components ?? [])
    out = applyComponent(out, normalize(join(dir, nested)), namespace, options);
  for (const ref of component.patches ?? []) out = applyPatch(out, dir, ref, options);
  return out;
}

function readResources(files: readonly string[], namespace: string | undefined): Manifest[] {
  const out: Manifest[] = [];
  for (const file of files) {
    for (const doc of yamlDocuments(join(DEPLOY, file))) {
      if (doc === null || doc === undefined) continue;
      if (!isRecord(doc) || typeof doc.kind !== "string" || typeof doc.apiVersion !== "string")
        throw new Error(`deploy/${file}: a document without apiVersion and kind`);
      const metadata = doc.metadata;
      if (!isRecord(metadata) || typeof metadata.name !== "string")
        throw new Error(`deploy/${file}: ${doc.kind} without metadata.name`);
      const ns = CLUSTER_SCOPED.has(doc.kind)
        ? undefined
        : ((metadata.namespace as string | undefined) ?? namespace);
      out.push({
        ...doc,
        apiVersion: doc.apiVersion,
        kind: doc.kind,
        metadata: { ...metadata, name: metadata.name, ...(ns ? { namespace: ns } : {}) },
        file: `deploy/${file}`,
      });
    }
  }
  return out;
}

export const groupVersion = (m: { apiVersion: string }): [string, string] =>
  m.apiVersion.includes("/") ? (m.apiVersion.split("/") as [string, string]) : ["", m.apiVersion];

function matches(m: Manifest, t: NonNullable<PatchRef["target"]>): boolean {
  const [group, version] = groupVersion(m);
  return (
    (t.kind === undefined || t.kind === m.kind) &&
    // kustomize reads a target's name as a regular expression of the whole name.
    (t.name === undefined || new RegExp(`^(?:${t.name})$`).test(m.metadata.name)) &&
    (t.group === undefined || t.group === group) &&
    (t.version === undefined || t.version === version)
  );
}

/** One `patches` entry of the component in `dir`, applied to every object it targets; returns the objects after it. */
function applyPatch(objects: Manifest[], dir: string, ref: PatchRef, options: LoadOptions): Manifest[] {
  const where = `deploy/${dir}: patch ${ref.path ?? ref.target?.name ?? "(inline)"}`;
  const text = ref.path !== undefined ? readFileSync(join(DEPLOY, dir, ref.path), "utf8") : ref.patch;
  if (text === undefined) throw new Error(`${where}: neither path nor patch`);
  const patch: unknown = parseYaml(text);
  let target = ref.target;
  if (!Array.isArray(patch)) {
    if (!isRecord(patch) || typeof patch.kind !== "string" || typeof patch.apiVersion !== "string")
      throw new Error(`${where}: neither JSON patch operations nor an object patch`);
    // Without a target, an object patch goes to the object it names itself.
    const [group, version] = groupVersion(patch as { apiVersion: string });
    target ??= { group, version, kind: patch.kind, name: String(field(patch, "metadata.name")) };
  }
  const hit = objects.filter((m) => matches(m, target ?? {}));
  if (hit.length === 0) {
    if (!options.unmatched) throw new Error(`${where}: matches no object`);
    options.unmatched.push(where);
    return objects;
  }
  if (Array.isArray(patch)) {
    for (const m of hit) for (const op of patch) applyOperation(m, op, where);
    return objects;
  }
  if ((patch as Record<string, unknown>).$patch === "delete") return objects.filter((m) => !hit.includes(m));
  applyStrategic(hit, patch as Record<string, unknown>, where);
  return objects;
}

/**
 * A strategic-merge patch other than a whole-object delete, the way the
 * components write them: a ClusterRole whose `rules` (no merge key) replace
 * the base's, and webhooks (merge key `name`) deleted with `$patch: delete`.
 */
function applyStrategic(objects: Manifest[], patch: Record<string, unknown>, where: string): void {
  const [target, ...more] = objects;
  if (target === undefined || more.length > 0) throw new Error(`${where}: must match exactly one object`);
  for (const [key, value] of Object.entries(patch)) {
    if (key === "apiVersion" || key === "kind" || key === "metadata") continue;
    if (key === "rules" && target.kind === "ClusterRole") target.rules = structuredClone(value);
    else if (key === "webhooks" && Array.isArray(value) && Array.isArray(target.webhooks)) {
      let hooks: unknown[] = target.webhooks;
      for (const entry of value) {
        if (!isRecord(entry) || entry.$patch !== "delete" || typeof entry.name !== "string")
          throw new Error(`${where}: only \`$patch: delete\` of a webhook by name is read here`);
        const before = hooks.length;
        hooks = hooks.filter((w) => !isRecord(w) || w.name !== entry.name);
        if (hooks.length !== before - 1) throw new Error(`${where}: no webhook ${entry.name}`);
      }
      target.webhooks = hooks;
    } else throw new Error(`${where}: field ${key} of ${target.kind} is not read here`);
  }
}

function applyOperation(root: Record<string, unknown>, op: unknown, where: string): void {
  if (!isRecord(op) || typeof op.op !== "string" || typeof op.path !== "string")
    throw new Error(`${where}: an operation without op and path`);
  if (op.op !== "add" && op.op !== "replace") throw new Error(`${where}: op ${op.op} is not read here`);
  const keys = op.path
    .split("/")
    .slice(1)
    .map((k) => k.replaceAll("~1", "/").replaceAll("~0", "~"));
  const last = keys.pop();
  if (last === undefined) throw new Error(`${where}: empty path`);
  let parent: unknown = root;
  for (const key of keys) {
    parent = Array.isArray(parent) ? parent[Number(key)] : isRecord(parent) ? parent[key] : undefined;
    if (parent === undefined) throw new Error(`${where}: ${op.path} does not exist`);
  }
  const value = structuredClone(op.value);
  if (Array.isArray(parent)) {
    const index = last === "-" ? parent.length : Number(last);
    if (
      !Number.isInteger(index) ||
      index < 0 ||
      index > parent.length ||
      (op.op === "replace" && index === parent.length)
    )
      throw new Error(`${where}: ${op.path} is out of range`);
    parent.splice(index, op.op === "replace" ? 1 : 0, value);
  } else if (isRecord(parent)) {
    if (op.op === "replace" && !(last in parent)) throw new Error(`${where}: ${op.path} does not exist`);
    parent[last] = value;
  } else throw new Error(`${where}: ${op.path} has no parent`);
}

export function ofKind(manifests: readonly Manifest[], kind: string): Manifest[] {
  return manifests.filter((m) => m.kind === kind);
}

/** A nested field, or undefined; `path` is dot-separated with numeric indexes allowed. */
export function field(value: unknown, path: string): unknown {
  let current: unknown = value;
  for (const key of path.split(".")) {
    if (Array.isArray(current)) current = current[Number(key)];
    else if (isRecord(current)) current = current[key];
    else return undefined;
  }
  return current;
}

export interface Container {
  name?: string;
  image?: string;
  ports?: { containerPort: number; protocol?: string }[];
  env?: { name: string; value?: string }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  readinessProbe?: unknown;
  livenessProbe?: unknown;
  securityContext?: Record<string, unknown>;
}

export function containersOf(ksvc: Manifest): Container[] {
  const containers = field(ksvc, "spec.template.spec.containers");
  return Array.isArray(containers) ? (containers as Container[]) : [];
}

/** The container Knative routes to: the one that declares a port. */
export function servingContainer(ksvc: Manifest): Container {
  const serving = containersOf(ksvc).filter((c) => (c.ports ?? []).length > 0);
  if (serving.length !== 1)
    throw new Error(
      `${ksvc.file}: Knative Service ${ksvc.metadata.name} needs exactly one container with a port`,
    );
  return serving[0] as Container;
}

export function envOf(container: Container): Map<string, string> {
  return new Map((container.env ?? []).map((e) => [e.name, e.value ?? ""]));
}

/** A kustomize-style id: kind.group/namespace/name. */
export const idOf = (m: Manifest): string =>
  `${m.kind}.${groupVersion(m)[0] || "core"}/${m.metadata.namespace ? `${m.metadata.namespace}/` : ""}${m.metadata.name}`;

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
}

function rulesKeys(rules: readonly Rule[]): Set<string> {
  const out = new Set<string>();
  for (const rule of rules) {
    if (rule.resourceNames !== undefined) throw new Error("no grant by resource name is read here");
    for (const group of rule.apiGroups ?? [])
      for (const resource of rule.resources ?? [])
        for (const verb of rule.verbs ?? []) out.add(permissionKey({ group, resource, verb }));
  }
  return out;
}

/**
 * Every group/resource:verb (permissionKey) granted in `objects` to a
 * ServiceAccount of `namespace`: cluster-wide through ClusterRoleBindings,
 * and in that namespace through its RoleBindings.
 */
export function accountGrants(
  objects: readonly Manifest[],
  account: string,
  namespace = "kube-storage-functions",
): { cluster: Set<string>; namespaced: Set<string> } {
  const boundTo = (b: Manifest) =>
    ((field(b, "subjects") ?? []) as { kind: string; name: string; namespace?: string }[]).some(
      (s) => s.kind === "ServiceAccount" && s.name === account && s.namespace === namespace,
    );
  const roleRules = (b: Manifest): Rule[] => {
    const kind = String(field(b, "roleRef.kind"));
    const name = String(field(b, "roleRef.name"));
    const role = objects.find(
      (m) =>
        m.kind === kind &&
        m.metadata.name === name &&
        (kind === "ClusterRole" || m.metadata.namespace === b.metadata.namespace),
    );
    if (role === undefined || (b.kind === "ClusterRoleBinding" && kind !== "ClusterRole"))
      throw new Error(`${b.kind} ${b.metadata.name}: binds ${kind} ${name}, which these objects lack`);
    return (field(role, "rules") ?? []) as Rule[];
  };
  return {
    cluster: rulesKeys(ofKind(objects, "ClusterRoleBinding").filter(boundTo).flatMap(roleRules)),
    namespaced: rulesKeys(
      ofKind(objects, "RoleBinding")
        .filter((b) => b.metadata.namespace === namespace && boundTo(b))
        .flatMap(roleRules),
    ),
  };
}

/** What ClusterRoleBindings grant a ServiceAccount (accountGrants' cluster part). */
export function clusterGrants(
  objects: readonly Manifest[],
  account: string,
  namespace = "kube-storage-functions",
): Set<string> {
  return accountGrants(objects, account, namespace).cluster;
}

/**
 * `kubectl kustomize` of deploy/ with the components (paths relative to
 * deploy/), from a kustomization outside deploy/ as an operator's would be
 * (one inside is a cycle to kustomize); undefined when kubectl is not installed.
 */
export function kubectlKustomize(components: readonly string[]): Manifest[] | undefined {
  const probe = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" });
  if (probe.error || probe.status !== 0) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "ksf-kustomize-"));
  try {
    const rel = relative(dir, DEPLOY);
    const list = components.map((c) => `  - ${join(rel, c)}\n`).join("");
    writeFileSync(join(dir, "kustomization.yaml"), `resources:\n  - ${rel}\ncomponents:\n${list}`);
    const run = spawnSync("kubectl", ["kustomize", dir], { encoding: "utf8", maxBuffer: 1 << 26 });
    if (run.status !== 0) throw new Error(`kubectl kustomize: ${run.stderr}`);
    return parseAllDocuments(run.stdout).map((d) => d.toJS() as Manifest);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
