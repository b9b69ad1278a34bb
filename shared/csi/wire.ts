// Conversion between decoded protobuf objects (proto.ts) and the shapes in types.ts.
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

import protobuf from "protobufjs/light.js";
import { isRecord } from "../is-record.ts";
import { csiMessageType } from "./proto.ts";

type FieldPlan =
  | { name: string; repeated: boolean; kind: "int64" }
  | { name: string; repeated: boolean; kind: "message"; typeName: string }
  | { name: string; kind: "map"; value: ValuePlan };

/** How to decode one map value: a plain copy, an int64, or a message. */
type ValuePlan = { kind: "copy" } | { kind: "int64" } | { kind: "message"; typeName: string };

/** protobufjs's names of the 64-bit integer types (map values and fields alike). */
const INT64_TYPES = new Set(["int64", "uint64", "sint64", "fixed64", "sfixed64"]);

const plans = new Map<string, FieldPlan[]>();

/** A field's (or map value's) type: int64, a message (by full name), or anything copied as is. */
function valuePlan(field: protobuf.Field): ValuePlan {
  if (INT64_TYPES.has(field.type)) return { kind: "int64" };
  const resolved = field.resolve().resolvedType;
  if (resolved instanceof protobuf.Type)
    return { kind: "message", typeName: resolved.fullName.replace(/^\./, "") };
  return { kind: "copy" };
}

function planFor(typeName: string): FieldPlan[] {
  const cached = plans.get(typeName);
  if (cached !== undefined) return cached;
  const plan: FieldPlan[] = [];
  for (const field of csiMessageType(typeName).fieldsArray) {
    const value = valuePlan(field);
    // A map field's type is its value type; protobufjs keeps the key type apart.
    if (field.map) {
      if (value.kind !== "copy") plan.push({ name: field.name, kind: "map", value });
      continue;
    }
    if (value.kind === "copy") continue;
    plan.push(
      value.kind === "int64"
        ? { name: field.name, repeated: field.repeated, kind: "int64" }
        : { name: field.name, repeated: field.repeated, kind: "message", typeName: value.typeName },
    );
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
 * A decoded message (as proto.ts's deserializers produce it) in
 * the shape of types.ts. `typeName` is fully qualified: "csi.v1.Volume".
 * The caller names the result type; the descriptors guarantee the shape.
 */
export function fromWire<T>(typeName: string, message: unknown): T {
  if (!isRecord(message)) throw new TypeError(`expected a decoded ${typeName} message`);
  return decodeMessage(typeName, message) as T;
}

/** A message from types.ts ready for proto.ts's serializers: bigint -> decimal string. */
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
