// What each function asks of the Kubernetes API, read from its source: the
// import closure of functions/<name>/main.ts (runtime imports only), scanned
// for `kube.<verb>(<descriptor>, …)`, `client.<verb>(<descriptor>, …)` and
// `updateObject(kube, <descriptor>, …)` calls. The descriptor identifiers are
// resolved against shared/kube/resources.ts, so a new call on a new kind (or
// with `subresource: "status"`) shows up here and the RBAC test fails until
// deploy/rbac.yaml grants it.

import { readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { ResourceDescriptor } from "../../shared/kube/resources.ts";
import * as resources from "../../shared/kube/resources.ts";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** One permission as RBAC spells it: apiGroup, resource (with "/status" for the subresource), verb. */
export interface Permission {
  group: string;
  resource: string;
  verb: string;
}

export interface KubeCall extends Permission {
  /** Repo-relative file and 1-based line of the call. */
  file: string;
  line: number;
}

export interface ScanResult {
  calls: KubeCall[];
  /** Calls whose first argument is not a descriptor from resources.ts, outside the generic helpers. */
  unresolved: { file: string; line: number; text: string }[];
  files: string[];
}

const CLIENT_VERBS: Readonly<Record<string, string[]>> = {
  get: ["get"],
  list: ["list"],
  create: ["create"],
  // PUT of the whole object, conditional on resourceVersion.
  replace: ["update"],
  patch: ["patch"],
  delete: ["delete"],
};

/**
 * Modules that take the descriptor as a parameter (`kube.get<T>(r, …)`):
 * their callers are what count, and those are scanned where they pass a
 * concrete descriptor.
 */
const GENERIC_HELPERS = new Set([
  "shared/kube/json-client.ts",
  "shared/kube/optimistic-update.ts",
  // lazyWatchedStore passes its caller's options on to startWatchedStore.
  "shared/kube/watched-store.ts",
  "shared/kube/tested-patch.ts",
]);

const DESCRIPTORS: ReadonlyMap<string, ResourceDescriptor> = new Map(
  Object.entries(resources).filter((entry): entry is [string, ResourceDescriptor] => {
    const value: unknown = entry[1];
    return typeof value === "object" && value !== null && "plural" in value && "group" in value;
  }),
);

/** Every descriptor resources.ts exports, by its export name. */
export function descriptors(): ReadonlyMap<string, ResourceDescriptor> {
  return DESCRIPTORS;
}

// A module as this scan sees it: top-level chunks (declarations and bare
// statements), its imports by local name, and its re-exports.
interface Chunk {
  /** The declared name; undefined for a bare statement (e.g. `if (import.meta.main) …`). */
  name?: string;
  start: number;
  text: string;
}

interface Module {
  file: string;
  text: string;
  chunks: Chunk[];
  /** local name -> [module file, exported name ("*" for a namespace import)] */
  imports: Map<string, [string, string]>;
  /** exported name -> [module file, name there] */
  reExports: Map<string, [string, string]>;
  starExports: string[];
}

const modules = new Map<string, Module>();

// A top-level line that starts a new chunk: an identifier or keyword at
// column 0 (a continuation such as `): Promise<` or `> {` is not one).
const TOP_LEVEL = /^[A-Za-z_$@]/;
const DECLARATION =
  /^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:function\*?|class|const|let|var|interface|type)\s+([A-Za-z_$][\w$]*)/;
const NAMED_IMPORT =
  /(?:^|\n)\s*(import|export)\s+(type\s+)?\{([^}]*)\}\s*from\s*["'](\.{1,2}\/[^"']+\.ts)["']/g;
const DEFAULT_OR_NAMESPACE_IMPORT =
  /(?:^|\n)\s*import\s+(?!type\s)(?:\*\s+as\s+([A-Za-z_$][\w$]*)|([A-Za-z_$][\w$]*))\s+from\s*["'](\.{1,2}\/[^"']+\.ts)["']/g;
const STAR_EXPORT = /(?:^|\n)\s*export\s+\*\s+from\s*["'](\.{1,2}\/[^"']+\.ts)["']/g;
const DYNAMIC_IMPORT = /\bimport\(\s*["'](\.{1,2}\/[^"']+\.ts)["']\s*\)/g;

function loadModule(file: string): Module {
  const known = modules.get(file);
  if (known) return known;
  const text = readFileSync(resolve(REPO, file), "utf8");
  const at = (spec: string) => relative(REPO, resolve(dirname(resolve(REPO, file)), spec));
  const imports = new Map<string, [string, string]>();
  const reExports = new Map<string, [string, string]>();
  const starExports: string[] = [];
  for (const m of text.matchAll(NAMED_IMPORT)) {
    if (m[2] !== undefined) continue; // `import type { … }`: erased at run time
    const target = at(m[4] as string);
    for (const part of (m[3] as string).split(",")) {
      const spec = part.trim();
      if (spec === "" || spec.startsWith("type ")) continue;
      const [imported, local] = spec.split(/\s+as\s+/).map((s) => s.trim()) as [string, string | undefined];
      if (m[1] === "import") imports.set(local ?? imported, [target, imported]);
      else reExports.set(local ?? imported, [target, imported]);
    }
  }
  for (const m of text.matchAll(DEFAULT_OR_NAMESPACE_IMPORT)) {
    const target = at(m[3] as string);
    if (m[1] !== undefined) imports.set(m[1], [target, "*"]);
    else if (m[2] !== undefined) imports.set(m[2], [target, "default"]);
  }
  for (const m of text.matchAll(STAR_EXPORT)) starExports.push(at(m[1] as string));
  // A dynamic import may load any export: treat it as a namespace import under a name nothing uses.
  for (const m of text.matchAll(DYNAMIC_IMPORT)) imports.set(`import(${m[1]})`, [at(m[1] as string), "*"]);

  const chunks: Chunk[] = [];
  let offset = 0;
  for (const line of text.split("\n")) {
    if (TOP_LEVEL.test(line) && !/^(import|export\s+(type\s+)?\{|export\s+\*)/.test(line)) {
      const name = DECLARATION.exec(line)?.[1];
      chunks.push({ ...(name === undefined ? {} : { name }), start: offset, text: "" });
    }
    offset += line.length + 1;
  }
  chunks.forEach((chunk, i) => {
    chunk.text = text.slice(chunk.start, chunks[i + 1]?.start ?? text.length);
  });
  const module: Module = { file, text, chunks, imports, reExports, starExports };
  modules.set(file, module);
  return module;
}

/**
 * The chunks reachable from an entry file's top level: every chunk of the
 * entry, then what their identifiers name (same-module declarations and
 * imported bindings, through re-exports), to a fixed point.
 */
export function reachableChunks(entry: string): { module: Module; chunk: Chunk }[] {
  const reached = new Map<string, { module: Module; chunk: Chunk }>();
  const queue: { module: Module; chunk: Chunk }[] = [];
  const visit = (module: Module, chunk: Chunk) => {
    const key = `${module.file}@${chunk.start}`;
    if (reached.has(key)) return;
    reached.set(key, { module, chunk });
    queue.push({ module, chunk });
  };
  const visitExport = (file: string, name: string, depth = 0): void => {
    if (depth > 20) return;
    const module = loadModule(file);
    if (name === "*") {
      for (const chunk of module.chunks) visit(module, chunk);
      for (const target of module.reExports.values()) visitExport(target[0], target[1], depth + 1);
      for (const star of module.starExports) visitExport(star, "*", depth + 1);
      return;
    }
    const own = module.chunks.filter((c) => c.name === name);
    for (const chunk of own) visit(module, chunk);
    if (own.length > 0) return;
    const re = module.reExports.get(name);
    if (re) {
      visitExport(re[0], re[1], depth + 1);
      return;
    }
    for (const star of module.starExports) visitExport(star, name, depth + 1);
  };
  visitExport(entry, "*");
  while (queue.length > 0) {
    const { module, chunk } = queue.pop() as { module: Module; chunk: Chunk };
    // Bare statements of imported modules run on import: reach them too.
    for (const c of module.chunks) if (c.name === undefined) visit(module, c);
    const identifiers = new Set(chunk.text.match(/[A-Za-z_$][\w$]*/g) ?? []);
    for (const id of identifiers) {
      for (const c of module.chunks) if (c.name === id && c !== chunk) visit(module, c);
      const imported = module.imports.get(id);
      if (imported) visitExport(imported[0], imported[1]);
    }
    for (const [local, target] of module.imports)
      if (local.startsWith("import(")) visitExport(target[0], "*");
  }
  return [...reached.values()];
}

/** Runtime module closure of an entry file, repo-relative paths (the files any reachable code lives in). */
export function importClosure(entry: string): string[] {
  return [...new Set(reachableChunks(entry).map((r) => r.module.file))].sort();
}

/** The text of a call's arguments: from the "(" at `open` to its matching ")". */
function argumentsAt(text: string, open: number): string {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === "(" || c === "{" || c === "[") depth++;
    else if (c === ")" || c === "}" || c === "]") {
      depth--;
      if (depth === 0) return text.slice(open + 1, i);
    }
  }
  return text.slice(open + 1);
}

function lineOf(text: string, index: number): number {
  let line = 1;
  for (let i = 0; i < index; i++) if (text[i] === "\n") line++;
  return line;
}

function resourceOf(r: ResourceDescriptor, status: boolean): Pick<Permission, "group" | "resource"> {
  return { group: r.group, resource: status ? `${r.plural}/status` : r.plural };
}

// `kube.get<T>(`, `this.kube.replace(`, `options.client.create<KubeObject>(`: the
// receiver is named kube or client in this code base. Generic arguments may nest one level.
const CLIENT_CALL =
  /\b(?:kube|client)\s*\.\s*(get|list|create|replace|patch|delete)\s*(?:<(?:[^<>]|<[^<>]*>)*>)?\s*\(/g;
const UPDATE_OBJECT = /\bupdateObject\s*(?:<(?:[^<>]|<[^<>]*>)*>)?\s*\(/g;
// `testedPatch(kube, <descriptor>, …)`: one PATCH of the main resource.
const TESTED_PATCH = /\btestedPatch\s*(?:<(?:[^<>]|<[^<>]*>)*>)?\s*\(/g;
// `startWatchedStore<T>({ …, resource: persistentVolumes, … })` or `lazyWatchedStore<T>({ … })`:
// a list, then a watch.
const WATCHED_STORE = /\b(?:start|lazy)WatchedStore\s*(?:<(?:[^<>]|<[^<>]*>)*>)?\s*\(/g;
const RESOURCE_OPTION = /\bresource\s*:\s*([A-Za-z_$][\w$]*)/;
const FIRST_IDENTIFIER = /^\s*([A-Za-z_$][\w$]*)\s*(?:,|$)/;
const SECOND_IDENTIFIER = /^[^,]*,\s*([A-Za-z_$][\w$]*)\s*(?:,|$)/;
const STATUS_OPTION = /subresource\s*:\s*["']status["']/;

interface Unit {
  file: string;
  /** The whole file, for line numbers. */
  fileText: string;
  /** Where `text` starts in the file. */
  start: number;
  text: string;
}

function scanUnits(units: readonly Unit[]): ScanResult {
  const calls: KubeCall[] = [];
  const unresolved: ScanResult["unresolved"] = [];
  for (const { file, fileText, start, text } of units) {
    const lineAt = (index: number) => lineOf(fileText, start + index);
    for (const m of text.matchAll(CLIENT_CALL)) {
      const verbs = CLIENT_VERBS[m[1] as string] ?? [];
      const open = (m.index ?? 0) + m[0].length - 1;
      const args = argumentsAt(text, open);
      const line = lineAt(m.index ?? 0);
      const name = FIRST_IDENTIFIER.exec(args)?.[1];
      const r = name === undefined ? undefined : DESCRIPTORS.get(name);
      if (r === undefined) {
        if (!GENERIC_HELPERS.has(file)) unresolved.push({ file, line, text: m[0] + args.slice(0, 80) });
        continue;
      }
      // Only replace and patch take a subresource here.
      const status = (m[1] === "replace" || m[1] === "patch") && STATUS_OPTION.test(args);
      for (const verb of verbs) calls.push({ ...resourceOf(r, status), verb, file, line });
    }
    for (const m of text.matchAll(WATCHED_STORE)) {
      const before = text.slice(Math.max(0, (m.index ?? 0) - 20), m.index);
      if (/\bfunction\s*$/.test(before)) continue; // the declaration itself
      const args = argumentsAt(text, (m.index ?? 0) + m[0].length - 1);
      const line = lineAt(m.index ?? 0);
      const r = DESCRIPTORS.get(RESOURCE_OPTION.exec(args)?.[1] ?? "");
      if (r === undefined) {
        if (!GENERIC_HELPERS.has(file)) unresolved.push({ file, line, text: m[0] + args.slice(0, 80) });
        continue;
      }
      for (const verb of ["list", "watch"]) calls.push({ ...resourceOf(r, false), verb, file, line });
    }
    for (const m of text.matchAll(TESTED_PATCH)) {
      const before = text.slice(Math.max(0, (m.index ?? 0) - 20), m.index);
      if (/\bfunction\s*$/.test(before)) continue; // the declaration itself
      const args = argumentsAt(text, (m.index ?? 0) + m[0].length - 1);
      const line = lineAt(m.index ?? 0);
      const r = DESCRIPTORS.get(SECOND_IDENTIFIER.exec(args)?.[1] ?? "");
      if (r === undefined) {
        if (!GENERIC_HELPERS.has(file)) unresolved.push({ file, line, text: m[0] + args.slice(0, 80) });
        continue;
      }
      calls.push({ ...resourceOf(r, false), verb: "patch", file, line });
    }
    for (const m of text.matchAll(UPDATE_OBJECT)) {
      const before = text.slice(Math.max(0, (m.index ?? 0) - 20), m.index);
      if (/\bfunction\s*$/.test(before)) continue; // the declaration itself
      const open = (m.index ?? 0) + m[0].length - 1;
      const args = argumentsAt(text, open);
      const line = lineAt(m.index ?? 0);
      const names = (SECOND_IDENTIFIER.exec(args)?.[1] ?? "").split("|");
      // `updateObject(kube, r, …)` with `r` chosen from a table: every descriptor the table names.
      const candidates = names[0] === "" ? [] : descriptorsBehind(names[0] as string, text, fileText);
      if (candidates.length === 0) {
        if (!GENERIC_HELPERS.has(file)) unresolved.push({ file, line, text: m[0] + args.slice(0, 80) });
        continue;
      }
      // updateObject reads the object (GET of the main resource) and PUTs it, to /status when asked.
      for (const r of candidates) {
        calls.push({ ...resourceOf(r, false), verb: "get", file, line });
        calls.push({ ...resourceOf(r, STATUS_OPTION.test(args)), verb: "update", file, line });
      }
    }
  }
  return { calls, unresolved, files: [...new Set(units.map((u) => u.file))].sort() };
}

/**
 * The descriptors an identifier stands for: itself when it is one, else the
 * descriptors its file assigns to a property or variable of that name
 * (`{ r: persistentVolumeClaims, … }`), the way source-protection.ts picks one.
 */
function descriptorsBehind(name: string, _chunk: string, fileText: string): ResourceDescriptor[] {
  const direct = DESCRIPTORS.get(name);
  if (direct) return [direct];
  const found: ResourceDescriptor[] = [];
  const assignment = new RegExp(`\\b${name}\\s*[:=]\\s*([A-Za-z_$][\\w$]*)`, "g");
  for (const m of fileText.matchAll(assignment)) {
    const r = DESCRIPTORS.get(m[1] as string);
    if (r && !found.includes(r)) found.push(r);
  }
  return found;
}

/** Scans whole files (repo-relative) for API calls. */
export function scanFiles(files: readonly string[]): ScanResult {
  return scanUnits(
    files.map((file) => {
      const text = readFileSync(resolve(REPO, file), "utf8");
      return { file, fileText: text, start: 0, text };
    }),
  );
}

/** The API calls one function's code can make: the code reachable from functions/<name>/main.ts. */
export function scanFunction(name: string): ScanResult {
  return scanUnits(
    reachableChunks(`functions/${name}/main.ts`).map(({ module, chunk }) => ({
      file: module.file,
      fileText: module.text,
      start: chunk.start,
      text: chunk.text,
    })),
  );
}

/**
 * Calls made only when an environment variable turns a feature on. They are
 * granted only to functions whose Knative Service sets that variable.
 */
export const ENV_GATED: readonly { file: string; env: string; value?: string; why: string }[] = [
  {
    file: "shared/http/auth.ts",
    env: "AUTH_MODE",
    value: "tokenreview",
    why: "callers' bearer tokens are checked with TokenReviews",
  },
  {
    file: "shared/provisioner/capacity/runtime/capacity-controller.ts",
    env: "ENABLE_CAPACITY",
    value: "true",
    why: "capacity tracking publishes CSIStorageCapacity objects",
  },
  {
    file: "shared/tls/serving.ts",
    env: "TLS_SECRET_NAME",
    why: "the serving certificate is read from a Secret through the API",
  },
];

export function permissionKey(p: Permission): string {
  return `${p.group || "core"}/${p.resource}:${p.verb}`;
}
