// shared/csi/csi-descriptor.json, csi-static.js and csi-tables.json are
// csi.proto made ahead of time (npm run generate:csi), and shared/csi/proto.ts
// builds grpc-js definitions from them without @grpc/proto-loader. They must
// be csi.proto as it is now, and say exactly what proto-loader says when it
// loads the .proto itself: the same methods on the same paths, and
// serializers that agree byte for byte and object for object on messages
// with every field set.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { loadSync, type MethodDefinition, type ServiceDefinition } from "@grpc/proto-loader";
import protobuf from "protobufjs/light.js";
import {
  CSI_DESCRIPTOR,
  CSI_PROTO,
  CSI_STATIC,
  CSI_TABLES as CSI_TABLES_FILE,
  csiDescriptorText,
  csiStaticText,
  csiTablesText,
  nestedOfKind,
} from "../../scripts/generate-csi.ts";
import {
  CSI_CONVERSION_OPTIONS,
  CSI_PACKAGE,
  CSI_SERVICE_NAMES,
  csiServiceDefinition,
  csiStaticType,
} from "../../shared/csi/proto.ts";
import { CSI_TABLES } from "../../shared/csi/tables.ts";

const fromProto = loadSync(CSI_PROTO, { keepCase: false, ...CSI_CONVERSION_OPTIONS });
const descriptorText = readFileSync(CSI_DESCRIPTOR, "utf8");
/** The committed descriptor reflected, for the messages the tests fill. */
const reflected = protobuf.Root.fromJSON(JSON.parse(descriptorText) as protobuf.INamespace);
reflected.resolveAll();

function protoLoaderService(name: string): ServiceDefinition {
  const found = fromProto[`${CSI_PACKAGE}.${name}`];
  assert.ok(found !== undefined && !("format" in found), `proto-loader has service ${name}`);
  return found as ServiceDefinition;
}

/**
 * A message of `type` with every field set (the first member of each oneof
 * only), nested messages to `depth`: distinct values, int64 beyond 2^53,
 * enums at their second value, maps and repeated fields with two entries.
 */
function everyFieldSet(type: protobuf.Type, depth = 3): Record<string, unknown> {
  const message: Record<string, unknown> = {};
  const skipped = new Set(type.oneofsArray.flatMap((oneof) => oneof.fieldsArray.slice(1).map((f) => f.name)));
  for (const field of type.fieldsArray) {
    if (skipped.has(field.name)) continue;
    const value = sampleValue(field, depth);
    if (value === undefined) continue;
    if (field.map) message[field.name] = { first: value, second: value };
    else message[field.name] = field.repeated ? [value, value] : value;
  }
  return message;
}

function sampleValue(field: protobuf.Field, depth: number): unknown {
  const resolved = field.resolve().resolvedType;
  if (resolved instanceof protobuf.Type) return depth > 0 ? everyFieldSet(resolved, depth - 1) : undefined;
  if (resolved instanceof protobuf.Enum)
    return Object.keys(resolved.values)[1] ?? Object.keys(resolved.values)[0];
  switch (field.type) {
    case "string":
      return `${field.name}-value`;
    case "bool":
      return true;
    case "bytes":
      return Buffer.from(field.name);
    case "double":
    case "float":
      return 1.5;
    case "int64":
    case "uint64":
    case "fixed64":
      return "9007199254740993";
    case "sint64":
    case "sfixed64":
      return "-9007199254740993";
    default:
      return field.id;
  }
}

test("the committed descriptor, static code and tables are csi.proto as it is now (else: npm run generate:csi)", async () => {
  // The JSON files parsed, not as text: the repository's formatter lays them out its own way.
  assert.deepEqual(JSON.parse(descriptorText), JSON.parse(csiDescriptorText()));
  assert.deepEqual(
    JSON.parse(readFileSync(CSI_TABLES_FILE, "utf8")),
    JSON.parse(csiTablesText(descriptorText)),
  );
  // The static code is not formatted (biome.json leaves it out), so as text.
  assert.equal(readFileSync(CSI_STATIC, "utf8"), await csiStaticText(CSI_DESCRIPTOR));
});

test("every message of the descriptor has static code and a decoding plan, and nothing else does", () => {
  const names = nestedOfKind(reflected, protobuf.Type).map((t) => t.fullName.slice(1));
  assert.ok(names.includes("csi.v1.VolumeCapability.MountVolume"), "nested messages too");
  assert.deepEqual(Object.keys(CSI_TABLES.messages).sort(), [...names].sort());
  for (const name of names) assert.equal(typeof csiStaticType(name).encode, "function", name);
  // Only messages: not a package, not what every function has, not a name csi.proto lacks.
  for (const name of [
    "csi.v1",
    "csi.v1.Volume.prototype",
    "csi.v1.Volume.constructor",
    "csi.v1.NoSuchThing",
    "",
  ])
    assert.throws(() => csiStaticType(name), /has no message/, name);
});

test("the decoding plans name each int64 and message field, with its element type", () => {
  // Spot checks against csi.proto: an int64 in a well-known type, a repeated message, wrappers, a map of strings.
  assert.deepEqual(CSI_TABLES.messages["google.protobuf.Timestamp"], [
    { name: "seconds", repeated: false, kind: "int64" },
  ]);
  assert.deepEqual(
    CSI_TABLES.messages["csi.v1.Volume"]?.find((f) => f.name === "accessibleTopology"),
    { name: "accessibleTopology", repeated: true, kind: "message", typeName: "csi.v1.Topology" },
  );
  assert.deepEqual(
    CSI_TABLES.messages["csi.v1.GetCapacityResponse"]?.map((f) => f.name),
    ["availableCapacity", "maximumVolumeSize", "minimumVolumeSize"],
  );
  assert.deepEqual(CSI_TABLES.messages["csi.v1.Topology"], [], "a map of strings is copied as it is");
});

test("the descriptor resolves whole, keeps the well-known types the messages use, and drops descriptor.proto", () => {
  const root = reflected;
  assert.equal(root.lookup("google.protobuf.FileDescriptorProto"), null);
  assert.equal(root.lookup("google.protobuf.FieldOptions"), null);
  // Kept: the well-known types csi.proto's messages use.
  for (const name of ["google.protobuf.Timestamp", "google.protobuf.Int64Value", "google.protobuf.BoolValue"])
    assert.ok(root.lookup(name) instanceof protobuf.Type, name);
  // That nothing a method needs was cut is the serializer tests' part: every field set, byte for byte.
  // The secret markers stay on the fields (redactSecrets is checked against the .proto itself).
  const create = root.lookupType("csi.v1.CreateVolumeRequest");
  assert.deepEqual(create.fields.secrets?.options, { "(csi_secret)": true });
});

test("every method is on proto-loader's path with its streaming, alias and message types", () => {
  for (const service of CSI_SERVICE_NAMES) {
    const expected = protoLoaderService(service);
    const actual = csiServiceDefinition(service);
    assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort(), service);
    for (const [name, theirs] of Object.entries(expected) as [string, MethodDefinition<object, object>][]) {
      const ours = actual[name];
      assert.ok(ours, name);
      assert.equal(ours.path, theirs.path);
      assert.equal(ours.requestStream, theirs.requestStream);
      assert.equal(ours.responseStream, theirs.responseStream);
      assert.equal(ours.originalName, theirs.originalName);
      assert.equal(
        ours.requestTypeName,
        `${CSI_PACKAGE}.${(theirs.requestType.type as { name: string }).name}`,
      );
      assert.equal(
        ours.responseTypeName,
        `${CSI_PACKAGE}.${(theirs.responseType.type as { name: string }).name}`,
      );
    }
  }
});

test("serializers agree with proto-loader's on empty messages and on every field set", () => {
  let compared = 0;
  for (const service of CSI_SERVICE_NAMES) {
    const expected = protoLoaderService(service);
    for (const [name, ours] of Object.entries(csiServiceDefinition(service))) {
      const theirs = expected[name] as MethodDefinition<object, object>;
      const sides = [
        [
          ours.requestTypeName,
          ours.requestSerialize,
          ours.requestDeserialize,
          theirs.requestSerialize,
          theirs.requestDeserialize,
        ],
        [
          ours.responseTypeName,
          ours.responseSerialize,
          ours.responseDeserialize,
          theirs.responseSerialize,
          theirs.responseDeserialize,
        ],
      ] as const;
      for (const [typeName, serialize, deserialize, theirSerialize, theirDeserialize] of sides) {
        for (const full of [false, true]) {
          const message = full ? everyFieldSet(reflected.lookupType(typeName)) : {};
          const bytes = serialize(message);
          assert.deepEqual(bytes, theirSerialize(message), `${typeName}: the same bytes`);
          const decoded = deserialize(bytes);
          assert.deepEqual(decoded, theirDeserialize(bytes), `${typeName}: the same object`);
          // Nothing is lost on the way back (int64 beyond 2^53, bytes, enums, maps). Only with
          // every field set: protobufjs writes a present default, so {} comes back longer.
          if (full) assert.deepEqual(serialize(decoded), bytes, `${typeName}: decoded and encoded again`);
          compared++;
        }
      }
    }
  }
  const methods = CSI_SERVICE_NAMES.reduce((n, s) => n + Object.keys(protoLoaderService(s)).length, 0);
  assert.ok(methods >= 15, `${methods} methods`);
  assert.equal(compared, methods * 4, "requests and responses, empty and full, of every method");
});
