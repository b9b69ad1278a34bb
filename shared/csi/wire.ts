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

import { isRecord } from "../is-record.ts";
import { CSI_TABLES, type CsiFieldPlan, type CsiValuePlan } from "./tables.ts";

/** The fields of a message that decoding changes (csi-tables.json, from the descriptors). */
function planFor(typeName: string): readonly CsiFieldPlan[] {
  const plan = Object.hasOwn(CSI_TABLES.messages, typeName) ? CSI_TABLES.messages[typeName] : undefined;
  if (plan === undefined) throw new Error(`csi.proto has no message ${typeName}`);
  return plan;
}

function toBigInt(value: unknown): unknown {
  if (typeof value === "string" && value !== "") return BigInt(value);
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
  return value;
}

function decodeValue(plan: CsiValuePlan, value: unknown): unknown {
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
    const plan: CsiValuePlan = field.kind === "int64" ? field : { kind: "message", typeName: field.typeName };
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
