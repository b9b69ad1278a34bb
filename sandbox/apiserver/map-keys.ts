// Go's encoding/json writes a map's keys sorted and a struct's fields in
// declaration order. The sandbox keeps objects as parsed JSON, so the fields
// that are Go maps (labels, annotations, resource lists, parameters...) are
// re-keyed in sorted order when stored, and plain JSON.stringify then writes
// them as kube-apiserver would. Custom resources are served as unstructured
// maps upstream, so every key of theirs is sorted.
//
// One case JS objects cannot hold: keys that look like array indices ("10",
// "9") always come first in ascending numeric order. An object with such a map
// key is written by goJson's slower encoder instead.
import { randomUUID } from "node:crypto";
import { isRecord } from "../../shared/is-record.ts";
import type { ResourceType } from "./resources.ts";
import type { KubeObject } from "./store.ts";

type Json = Record<string, unknown>;

const resourceList = (prefix: string): string[] => [`${prefix}.requests`, `${prefix}.limits`];

function labelSelector(prefix: string): string[] {
  return [`${prefix}.matchLabels`];
}

function podAffinityTerms(prefix: string): string[] {
  const out: string[] = [];
  for (const kind of ["podAffinity", "podAntiAffinity"]) {
    const base = `${prefix}.affinity.${kind}`;
    for (const term of [
      `${base}.requiredDuringSchedulingIgnoredDuringExecution[]`,
      `${base}.preferredDuringSchedulingIgnoredDuringExecution[].podAffinityTerm`,
    ]) {
      out.push(...labelSelector(`${term}.labelSelector`), ...labelSelector(`${term}.namespaceSelector`));
    }
  }
  return out;
}

function podSpecMaps(prefix: string): string[] {
  const out = [
    `${prefix}.nodeSelector`,
    `${prefix}.overhead`,
    ...resourceList(`${prefix}.resources`),
    `${prefix}.volumes[].csi.volumeAttributes`,
    `${prefix}.volumes[].flexVolume.options`,
    `${prefix}.volumes[].ephemeral.volumeClaimTemplate.metadata.labels`,
    `${prefix}.volumes[].ephemeral.volumeClaimTemplate.metadata.annotations`,
    ...resourceList(`${prefix}.volumes[].ephemeral.volumeClaimTemplate.spec.resources`),
    ...labelSelector(`${prefix}.volumes[].ephemeral.volumeClaimTemplate.spec.selector`),
    ...labelSelector(`${prefix}.topologySpreadConstraints[].labelSelector`),
    ...podAffinityTerms(prefix),
  ];
  for (const containers of ["containers", "initContainers", "ephemeralContainers"]) {
    out.push(...resourceList(`${prefix}.${containers}[].resources`));
  }
  return out;
}

function containerStatusMaps(prefix: string): string[] {
  return [`${prefix}[].allocatedResources`, ...resourceList(`${prefix}[].resources`)];
}

const webhookSelectors = [
  ...labelSelector("webhooks[].namespaceSelector"),
  ...labelSelector("webhooks[].objectSelector"),
];

/** Where the built-in types the sandbox serves have Go maps, by resource. */
const MAP_FIELDS: Record<string, readonly string[]> = {
  persistentvolumes: ["spec.capacity", "spec.csi.volumeAttributes", "spec.flexVolume.options"],
  persistentvolumeclaims: [
    ...resourceList("spec.resources"),
    ...labelSelector("spec.selector"),
    "status.capacity",
    "status.allocatedResources",
    "status.allocatedResourceStatuses",
  ],
  pods: [
    ...podSpecMaps("spec"),
    ...containerStatusMaps("status.containerStatuses"),
    ...containerStatusMaps("status.initContainerStatuses"),
    ...containerStatusMaps("status.ephemeralContainerStatuses"),
  ],
  nodes: ["status.capacity", "status.allocatable"],
  secrets: ["data", "stringData"],
  storageclasses: ["parameters"],
  volumeattributesclasses: ["parameters"],
  csistoragecapacities: labelSelector("nodeTopology"),
  volumeattachments: [
    "status.attachmentMetadata",
    "spec.source.inlineVolumeSpec.capacity",
    "spec.source.inlineVolumeSpec.csi.volumeAttributes",
  ],
  mutatingwebhookconfigurations: webhookSelectors,
  validatingwebhookconfigurations: webhookSelectors,
};

const COMMON_MAP_FIELDS = ["metadata.labels", "metadata.annotations"];

/** Parsed paths: "[]" after a name steps into every element of that list. */
const parsedPaths = new Map<string, string[][]>();

function pathsOf(plural: string): string[][] {
  let paths = parsedPaths.get(plural);
  if (!paths) {
    paths = [...COMMON_MAP_FIELDS, ...(MAP_FIELDS[plural] ?? [])].map((p) =>
      p.split(".").flatMap((s) => (s.endsWith("[]") ? [s.slice(0, -2), "[]"] : [s])),
    );
    parsedPaths.set(plural, paths);
  }
  return paths;
}

/** Calls fn(parent, key) for every map at `path` under `node`. */
function visit(
  node: unknown,
  path: readonly string[],
  i: number,
  fn: (parent: Json, key: string) => void,
): void {
  if (i === path.length - 1) {
    if (isRecord(node) && isRecord(node[path[i]!])) fn(node, path[i]!);
    return;
  }
  const step = path[i]!;
  if (path[i + 1] === "[]") {
    const list = isRecord(node) ? node[step] : undefined;
    if (Array.isArray(list)) for (const item of list) visit(item, path, i + 2, fn);
    return;
  }
  if (isRecord(node)) visit(node[step], path, i + 1, fn);
}

/** Go compares map keys as byte strings; for the ASCII keys Kubernetes allows, code units agree. */
function byGoOrder(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** out[k] = value, where a "__proto__" parsed from JSON stays an ordinary key. */
function setKey(out: Json, k: string, value: unknown): void {
  if (k === "__proto__")
    Object.defineProperty(out, k, { value, writable: true, enumerable: true, configurable: true });
  else out[k] = value;
}

function sortedCopy(m: Json): Json {
  const out: Json = {};
  for (const k of Object.keys(m).sort(byGoOrder)) setKey(out, k, m[k]);
  return out;
}

function sortAll(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortAll);
  if (!isRecord(v)) return v;
  const out = sortedCopy(v);
  for (const k of Object.keys(out)) out[k] = sortAll(out[k]);
  return out;
}

/**
 * Whether a sorted object has index-like map keys, remembered for the stored
 * objects (never modified after they are stored) so that answering a GET,
 * a list or a watch event from them costs one lookup.
 */
const needsEncoder = new WeakMap<object, boolean>();

/**
 * Re-keys o's map fields (every object, for a custom resource) in Go's order,
 * in place. An empty map field goes, as Go's omitempty leaves it out (a
 * custom resource keeps what it was given).
 */
export function sortMapKeys(t: ResourceType, o: KubeObject): void {
  if (t.customResource) {
    const sorted = sortAll(o) as Json;
    for (const k of Object.keys(o)) delete (o as Json)[k];
    for (const k of Object.keys(sorted)) setKey(o as Json, k, sorted[k]);
    needsEncoder.set(o, containsIndexKey(o));
    return;
  }
  let indexKeys = false;
  for (const path of pathsOf(t.plural)) {
    visit(o, path, 0, (parent, key) => {
      const sorted = sortedCopy(parent[key] as Json);
      indexKeys ||= hasIndexKey(sorted);
      if (Object.keys(sorted).length === 0) delete parent[key];
      else parent[key] = sorted;
    });
  }
  needsEncoder.set(o, indexKeys);
}

const arrayIndex = /^(0|[1-9]\d{0,9})$/;

function hasIndexKey(m: Json): boolean {
  for (const k in m) if (arrayIndex.test(k) && Number(k) < 4294967295) return true;
  return false;
}

function hasIndexKeys(t: ResourceType, o: unknown): boolean {
  const known = typeof o === "object" && o !== null ? needsEncoder.get(o) : undefined;
  if (known !== undefined) return known;
  if (t.customResource) return containsIndexKey(o);
  let found = false;
  for (const path of pathsOf(t.plural)) {
    visit(o, path, 0, (parent, key) => {
      found ||= hasIndexKey(parent[key] as Json);
    });
    if (found) return true;
  }
  return false;
}

function containsIndexKey(v: unknown): boolean {
  if (Array.isArray(v)) return v.some(containsIndexKey);
  if (!isRecord(v)) return false;
  return hasIndexKey(v) || Object.values(v).some(containsIndexKey);
}

/** JSON text with every key of every object in Go's order (only for the rare objects that need it). */
function encodeSorted(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map((e) => (e === undefined ? "null" : encodeSorted(e))).join(",")}]`;
  if (!isRecord(v)) return JSON.stringify(v) ?? "null";
  const parts: string[] = [];
  for (const k of Object.keys(v).sort(byGoOrder)) {
    if (v[k] !== undefined) parts.push(`${JSON.stringify(k)}:${encodeSorted(v[k])}`);
  }
  return `{${parts.join(",")}}`;
}

/**
 * o as kube-apiserver would write it. Objects whose maps are all free of
 * index-like keys (almost all) go through JSON.stringify; others are
 * re-encoded with their maps' keys written in Go's order.
 */
export function goJson(t: ResourceType, o: unknown): string {
  if (!hasIndexKeys(t, o)) return JSON.stringify(o);
  if (t.customResource) return encodeSorted(o);
  const copy = structuredClone(o) as Json;
  const marks = new Map<string, string>();
  const token = randomUUID();
  let n = 0;
  // Each offending map becomes a placeholder string, replaced by its sorted text afterwards.
  for (const path of pathsOf(t.plural)) {
    visit(copy, path, 0, (parent, key) => {
      const m = parent[key] as Json;
      if (!hasIndexKey(m)) return;
      const mark = `${token}:${n++}`;
      marks.set(JSON.stringify(mark), encodeSorted(m));
      parent[key] = mark;
    });
  }
  let text = JSON.stringify(copy);
  for (const [mark, encoded] of marks) text = text.replace(mark, () => encoded);
  return text;
}

/**
 * A list: `head`'s fields, then each of `items` as `shape` makes it, written
 * as goJson writes it, then `tail`'s fields. (The items are checked before
 * shaping, so that stored objects are recognised.)
 */
export function goJsonList<T>(
  t: ResourceType,
  head: Record<string, unknown>,
  items: readonly T[],
  shape: (item: T) => unknown = (item) => item,
  tail: Record<string, unknown> = {},
): string {
  if (!items.some((o) => hasIndexKeys(t, o))) {
    return JSON.stringify({ ...head, items: items.map(shape), ...tail });
  }
  const fields = (o: Record<string, unknown>): string => JSON.stringify(o).slice(1, -1);
  const encoded = `"items":[${items.map((o) => goJson(t, shape(o))).join(",")}]`;
  return `{${[fields(head), encoded, fields(tail)].filter((f) => f !== "").join(",")}}`;
}
