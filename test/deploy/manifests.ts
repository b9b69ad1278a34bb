// Reads deploy/ the way `kubectl apply -k deploy/` would see it: every file
// kustomization.yaml lists, split into documents, with the kustomization's
// namespace applied to namespaced objects that name none, and the components
// asked for added: their resources, then their JSON patches (RFC 6902, the
// only patch form deploy/components uses; anything else fails loudly).

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { isRecord } from "../../shared/is-record.ts";
import { REPO } from "./code-rbac.ts";

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

/**
 * The objects of deploy/ as applied by default, or, with `components`, as
 * applied with those components (paths relative to deploy/) added, each
 * component's resources in the parent's namespace.
 */
export function loadManifests(components: readonly string[] = []): Manifest[] {
  const kustomization = readKustomization();
  const files = [
    ...(kustomization.resources ?? []),
    ...components.flatMap((dir) => (readKustomization(dir).resources ?? []).map((f) => join(dir, f))),
  ];
  const out: Manifest[] = [];
  for (const file of files) {
    for (const doc of yamlDocuments(join(DEPLOY, file))) {
      if (doc === null || doc === undefined) continue;
      if (!isRecord(doc) || typeof doc.kind !== "string" || typeof doc.apiVersion !== "string")
        throw new Error(`deploy/${file}: a document without apiVersion and kind`);
      const metadata = doc.metadata;
      if (!isRecord(metadata) || typeof metadata.name !== "string")
        throw new Error(`deploy/${file}: ${doc.kind} without metadata.name`);
      const namespaced = !CLUSTER_SCOPED.has(doc.kind);
      const namespace = namespaced
        ? ((metadata.namespace as string | undefined) ?? kustomization.namespace)
        : undefined;
      out.push({
        ...doc,
        apiVersion: doc.apiVersion,
        kind: doc.kind,
        metadata: { ...metadata, name: metadata.name, ...(namespace ? { namespace } : {}) },
        file: `deploy/${file}`,
      });
    }
  }
  for (const dir of components)
    for (const ref of readKustomization(dir).patches ?? []) applyPatch(out, dir, ref);
  return out;
}

/** One `patches` entry of the component in `dir`, applied in place to the one object it targets. */
function applyPatch(objects: Manifest[], dir: string, ref: PatchRef): void {
  const where = `deploy/${dir}: patch ${ref.path ?? "(inline)"}`;
  const text = ref.path !== undefined ? readFileSync(join(DEPLOY, dir, ref.path), "utf8") : ref.patch;
  if (text === undefined) throw new Error(`${where}: neither path nor patch`);
  const ops: unknown = parseYaml(text);
  if (!Array.isArray(ops)) throw new Error(`${where}: not a list of JSON patch operations`);
  const t = ref.target ?? {};
  const targets = objects.filter((m) => {
    const [group, version] = m.apiVersion.includes("/") ? m.apiVersion.split("/") : ["", m.apiVersion];
    return (
      (t.kind === undefined || t.kind === m.kind) &&
      // kustomize reads a target's name as a regular expression of the whole name.
      (t.name === undefined || new RegExp(`^(?:${t.name})$`).test(m.metadata.name)) &&
      (t.group === undefined || t.group === group) &&
      (t.version === undefined || t.version === version)
    );
  });
  if (targets.length !== 1) throw new Error(`${where}: targets ${targets.length} objects, not one`);
  const target = targets[0] as Manifest;
  for (const op of ops) applyOperation(target, op, where);
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
