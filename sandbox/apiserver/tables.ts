// Server-side printing (meta.k8s.io/v1 Table) for `kubectl get`: kubectl asks
// for Tables and, for built-in kinds, has no client-side printer to fall back
// on. Columns follow kube-apiserver's printers for the kinds we serve.
import { annBetaDefaultClass, annDefaultClass } from "../../shared/kube/well-known.ts";
import type { ResourceType } from "./resources.ts";
import type { KubeObject } from "./store.ts";

interface Column {
  name: string;
  type: string;
  format?: string;
  description: string;
  priority?: number;
  cell: (o: KubeObject) => string | number | boolean;
}

type Obj = Record<string, unknown>;

function at(o: unknown, ...path: string[]): unknown {
  let cur: unknown = o;
  for (const p of path) {
    if (!cur || typeof cur !== "object") return undefined;
    cur = (cur as Obj)[p];
  }
  return cur;
}

function str(v: unknown, fallback = ""): string {
  return typeof v === "string" ? v : v === undefined || v === null ? fallback : String(v);
}

/** kubectl's short age format: 5s, 3m10s, 4h, 2d. */
export function age(timestamp: string | undefined, nowMs = Date.now()): string {
  if (!timestamp) return "<unknown>";
  const s = Math.max(0, Math.floor((nowMs - Date.parse(timestamp)) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return `${m}m${s % 60 ? `${s % 60}s` : ""}`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

const accessModeShort: Record<string, string> = {
  ReadWriteOnce: "RWO",
  ReadOnlyMany: "ROX",
  ReadWriteMany: "RWX",
  ReadWriteOncePod: "RWOP",
};

function modes(v: unknown): string {
  return Array.isArray(v) ? v.map((m) => accessModeShort[str(m)] ?? str(m)).join(",") : "";
}

const name: Column = {
  name: "Name",
  type: "string",
  format: "name",
  description: "Name must be unique within a namespace.",
  cell: (o) => str(o.metadata.name),
};
const ageColumn: Column = {
  name: "Age",
  type: "string",
  description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
  cell: (o) => age(o.metadata.creationTimestamp),
};

/** A string column showing the field at `path`; `description` names the field as upstream's printer does. */
function field(name: string, description: string, path: readonly string[]): Column {
  return { name, type: "string", description, cell: (o) => str(at(o, ...path)) };
}

function accessModes(path: readonly string[]): Column {
  return {
    name: "Access Modes",
    type: "string",
    description: "accessModes",
    cell: (o) => modes(at(o, ...path)),
  };
}

const phase = field("Status", "phase", ["status", "phase"]);
const storageClassName = field("StorageClass", "storageClassName", ["spec", "storageClassName"]);
const volumeAttributesClass: Column = {
  name: "VolumeAttributesClass",
  type: "string",
  description: "volumeAttributesClassName",
  cell: (o) => str(at(o, "spec", "volumeAttributesClassName"), "<unset>"),
};

const columnsByPlural: Record<string, Column[]> = {
  persistentvolumes: [
    name,
    field("Capacity", "capacity", ["spec", "capacity", "storage"]),
    accessModes(["spec", "accessModes"]),
    field("Reclaim Policy", "persistentVolumeReclaimPolicy", ["spec", "persistentVolumeReclaimPolicy"]),
    phase,
    {
      name: "Claim",
      type: "string",
      description: "claimRef",
      cell: (o) => {
        const ref = at(o, "spec", "claimRef");
        return ref ? `${str(at(ref, "namespace"))}/${str(at(ref, "name"))}` : "";
      },
    },
    storageClassName,
    volumeAttributesClass,
    field("Reason", "reason", ["status", "reason"]),
    ageColumn,
    { ...field("VolumeMode", "volumeMode", ["spec", "volumeMode"]), priority: 1 },
  ],
  persistentvolumeclaims: [
    name,
    phase,
    field("Volume", "volumeName", ["spec", "volumeName"]),
    field("Capacity", "capacity", ["status", "capacity", "storage"]),
    accessModes(["status", "accessModes"]),
    storageClassName,
    volumeAttributesClass,
    ageColumn,
    { ...field("VolumeMode", "volumeMode", ["spec", "volumeMode"]), priority: 1 },
  ],
  storageclasses: [
    {
      ...name,
      cell: (o) => {
        const a = o.metadata.annotations ?? {};
        const isDefault = a[annDefaultClass] === "true" || a[annBetaDefaultClass] === "true";
        return `${str(o.metadata.name)}${isDefault ? " (default)" : ""}`;
      },
    },
    field("Provisioner", "provisioner", ["provisioner"]),
    field("ReclaimPolicy", "reclaimPolicy", ["reclaimPolicy"]),
    field("VolumeBindingMode", "volumeBindingMode", ["volumeBindingMode"]),
    {
      name: "AllowVolumeExpansion",
      type: "string",
      description: "allowVolumeExpansion",
      cell: (o) => String(o.allowVolumeExpansion === true),
    },
    ageColumn,
  ],
  volumeattributesclasses: [name, field("DriverName", "driverName", ["driverName"]), ageColumn],
  csistoragecapacities: [
    name,
    field("StorageClassName", "storageClassName", ["storageClassName"]),
    field("Capacity", "capacity", ["capacity"]),
    ageColumn,
  ],
  volumeattachments: [
    name,
    field("Attacher", "attacher", ["spec", "attacher"]),
    field("PV", "persistentVolumeName", ["spec", "source", "persistentVolumeName"]),
    field("Node", "nodeName", ["spec", "nodeName"]),
    {
      name: "Attached",
      type: "boolean",
      description: "attached",
      cell: (o) => at(o, "status", "attached") === true,
    },
    ageColumn,
  ],
  pods: [
    name,
    phase,
    {
      name: "Node",
      type: "string",
      description: "nodeName",
      cell: (o) => str(at(o, "spec", "nodeName"), "<none>"),
    },
    ageColumn,
  ],
  events: [
    {
      name: "Last Seen",
      type: "string",
      description: "lastTimestamp",
      cell: (o) => age(str(o.lastTimestamp) || undefined),
    },
    field("Type", "type", ["type"]),
    field("Reason", "reason", ["reason"]),
    {
      name: "Object",
      type: "string",
      description: "involvedObject",
      cell: (o) =>
        `${str(at(o, "involvedObject", "kind")).toLowerCase()}/${str(at(o, "involvedObject", "name"))}`,
    },
    field("Message", "message", ["message"]),
  ],
};

function columnsFor(t: ResourceType): Column[] {
  return columnsByPlural[t.plural] ?? [name, ageColumn];
}

function partialMetadata(o: KubeObject): Obj {
  return { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: o.metadata };
}

export function toTable(
  t: ResourceType,
  objects: KubeObject[],
  listMeta: Obj,
  includeObject: "None" | "Metadata" | "Object" = "Metadata",
): Obj {
  const columns = columnsFor(t);
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: listMeta,
    columnDefinitions: columns.map((c) => ({
      name: c.name,
      type: c.type,
      format: c.format ?? "",
      description: c.description,
      priority: c.priority ?? 0,
    })),
    rows: objects.map((o) => ({
      cells: columns.map((c) => c.cell(o)),
      ...(includeObject === "None" ? {} : { object: includeObject === "Object" ? o : partialMetadata(o) }),
    })),
  };
}

export function wantsTable(accept: string | undefined): boolean {
  return accept !== undefined && /as=Table/.test(accept);
}
