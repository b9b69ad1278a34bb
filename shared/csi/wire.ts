// Conversion between proto-loader's objects and the shapes in types.ts.
//
// Decoding (fromWire) is driven by the message descriptors of csi.proto, so
// no int64 field can be forgotten, however deeply nested (Snapshot's
// creationTime.seconds, GetCapacity's Int64Value wrappers, map values):
//   - int64-family fields: decimal string -> bigint;
//   - sub-message fields that decoded as null (absent) are left out.
// Everything else (strings, numbers, booleans, enum names, oneof
// discriminators) is copied as is.
//
// Encoding (toWire) only has to turn bigint into decimal strings: protobufjs
// accepts strings for int64 exactly, while its handling of bigint depends on
// the installed long.js version (5.x would silently encode 0).

import { isRecord } from "../is-record.ts";
import { csiPackageDefinition } from "./proto.ts";

// The parts of google.protobuf.DescriptorProto that proto-loader exposes as
// `type: object` and we read.
interface FieldDescriptorLike {
  name: string;
  label: string;
  type: string;
  typeName: string;
}

interface DescriptorLike {
  name: string;
  field: FieldDescriptorLike[];
  nestedType: DescriptorLike[];
  options: { mapEntry?: boolean } | null;
}

type FieldPlan =
  | { name: string; repeated: boolean; kind: "int64" }
  | { name: string; repeated: boolean; kind: "message"; typeName: string }
  | { name: string; kind: "map"; value: ValuePlan };

/** How to decode one map value: a plain copy, an int64, or a message. */
type ValuePlan = { kind: "copy" } | { kind: "int64" } | { kind: "message"; typeName: string };

const INT64_TYPES = new Set(["TYPE_INT64", "TYPE_UINT64", "TYPE_SINT64", "TYPE_FIXED64", "TYPE_SFIXED64"]);

let descriptors: Map<string, DescriptorLike> | undefined;
const plans = new Map<string, FieldPlan[]>();

function isDescriptor(value: unknown): value is DescriptorLike {
  return (
    typeof value === "object" &&
    value !== null &&
    Array.isArray((value as { field?: unknown }).field) &&
    Array.isArray((value as { nestedType?: unknown }).nestedType)
  );
}

/** Every message type by fully qualified name, nested types included. */
function allDescriptors(): Map<string, DescriptorLike> {
  if (descriptors !== undefined) return descriptors;
  const found = new Map<string, DescriptorLike>();
  const add = (fullName: string, descriptor: DescriptorLike): void => {
    found.set(fullName, descriptor);
    for (const nested of descriptor.nestedType) add(`${fullName}.${nested.name}`, nested);
  };
  for (const [name, definition] of Object.entries(csiPackageDefinition())) {
    if ("format" in definition && definition.format === "Protocol Buffer 3 DescriptorProto") {
      if (isDescriptor(definition.type)) add(name, definition.type);
    }
  }
  descriptors = found;
  return found;
}

/** Protobuf scoping: look the name up from the innermost enclosing scope outwards. */
function resolveType(scope: string, typeName: string): string {
  const all = allDescriptors();
  if (typeName.startsWith(".")) return typeName.slice(1);
  const parts = scope.split(".");
  for (let i = parts.length; i >= 0; i--) {
    const candidate = [...parts.slice(0, i), typeName].join(".");
    if (all.has(candidate)) return candidate;
  }
  throw new Error(`csi.proto: cannot resolve type ${typeName} from ${scope}`);
}

function valuePlan(scope: string, field: FieldDescriptorLike): ValuePlan {
  if (INT64_TYPES.has(field.type)) return { kind: "int64" };
  if (field.type === "TYPE_MESSAGE") return { kind: "message", typeName: resolveType(scope, field.typeName) };
  return { kind: "copy" };
}

function planFor(typeName: string): FieldPlan[] {
  const cached = plans.get(typeName);
  if (cached !== undefined) return cached;
  const descriptor = allDescriptors().get(typeName);
  if (descriptor === undefined) throw new Error(`csi.proto has no message ${typeName}`);
  const plan: FieldPlan[] = [];
  for (const field of descriptor.field) {
    const repeated = field.label === "LABEL_REPEATED";
    if (INT64_TYPES.has(field.type)) {
      plan.push({ name: field.name, repeated, kind: "int64" });
    } else if (field.type === "TYPE_MESSAGE") {
      const resolved = resolveType(typeName, field.typeName);
      const target = allDescriptors().get(resolved);
      if (target?.options?.mapEntry === true) {
        const valueField = target.field.find((f) => f.name === "value");
        const value: ValuePlan =
          valueField === undefined ? { kind: "copy" } : valuePlan(resolved, valueField);
        plan.push({ name: field.name, kind: "map", value });
      } else {
        plan.push({ name: field.name, repeated, kind: "message", typeName: resolved });
      }
    }
  }
  plans.set(typeName, plan);
  return plan;
}

function toBigInt(value: unknown): unknown {
  if (typeof value === "string" && value !== "") return BigInt(value);
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
  return value;
}

function decodeValue(plan: ValuePlan, value: unknown): unknown {
  if (plan.kind === "int64") return toBigInt(value);
  if (plan.kind === "message") return isRecord(value) ? decodeMessage(plan.typeName, value) : value;
  return value;
}

function decodeMessage(typeName: string, message: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...message };
  for (const field of planFor(typeName)) {
    const value = message[field.name];
    if (value === null || value === undefined) {
      delete out[field.name];
      continue;
    }
    if (field.kind === "map") {
      if (field.value.kind === "copy" || !isRecord(value)) continue;
      const plan = field.value;
      out[field.name] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, decodeValue(plan, v)]));
      continue;
    }
    const plan: ValuePlan = field.kind === "int64" ? field : { kind: "message", typeName: field.typeName };
    out[field.name] =
      field.repeated && Array.isArray(value)
        ? value.map((item) => decodeValue(plan, item))
        : decodeValue(plan, value);
  }
  return out;
}

/**
 * A decoded message (as proto-loader produced it with CSI_LOADER_OPTIONS) in
 * the shape of types.ts. `typeName` is fully qualified: "csi.v1.Volume".
 * The caller names the result type; the descriptors guarantee the shape.
 */
export function fromWire<T>(typeName: string, message: unknown): T {
  if (!isRecord(message)) throw new TypeError(`expected a decoded ${typeName} message`);
  return decodeMessage(typeName, message) as T;
}

/** A message from types.ts ready for proto-loader's serializer: bigint -> decimal string. */
export function toWire(message: object): Record<string, unknown> {
  return encodeValue(message) as Record<string, unknown>;
}

function encodeValue(value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (Array.isArray(value)) return value.map(encodeValue);
  if (isRecord(value) && !Buffer.isBuffer(value)) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) out[key] = encodeValue(item);
    return out;
  }
  return value;
}
