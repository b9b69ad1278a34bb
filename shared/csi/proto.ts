// csi.proto for grpc-js, from what `npm run generate:csi` made of it ahead of
// time (each checked against the .proto by test/csi/descriptor.test.ts):
// csi-static.js, protobufjs's encode/decode/fromObject/toObject of every
// message as plain code, and csi-tables.json, the methods' paths and types.
// This module makes method definitions (path + serializers) for the client,
// service definitions for servers (the sandbox driver, test fakes) and
// client constructors for whoever prefers those.
//
// Why not @grpc/proto-loader or a protobufjs Root at run time: both build
// what we never use (descriptors for reflection, functions made with new
// Function that no code cache keeps) at every cold start. The static code is
// what that generation produces, written once; the serializers are the ones
// proto-loader makes, and the descriptor test holds them to proto-loader's
// byte for byte and object for object. (Figures: bench/README.md.)
//
// Conversion options, and why:
//   field names      -> camelCase (volumeId), as parsed into the descriptor:
//                       the idiomatic JS spelling and the protobuf JSON
//                       mapping's names.
//   longs: String    -> int64 decodes to a decimal string: exact at any size
//                       (Number would silently round above 2^53). wire.ts
//                       turns them into bigint at our API edge.
//   enums: String    -> enum values as their proto names
//                       ("SINGLE_NODE_WRITER", string unions in types.ts),
//                       readable in logs; encoding accepts names as well.
//   defaults: true   -> decoded messages carry every scalar, list and map
//                       (proto3 cannot tell "" from absent anyway), so code
//                       reads `volume.volumeId`, not `volume.volumeId ?? ""`.
//                       Absent sub-messages decode as null; wire.ts drops
//                       them so they read as undefined.
//   oneofs: true     -> a decoded oneof names its set member
//                       (`accessType: "mount"`), handy for switches.

import type { MethodDefinition, ServiceClientConstructor, ServiceDefinition } from "@grpc/grpc-js";
import { makeClientConstructor } from "@grpc/grpc-js";
import type { IConversionOptions } from "protobufjs";
import type { StaticMessageType, StaticNamespace } from "./csi-static.js";
import * as staticCode from "./csi-static.js";
import { CSI_TABLES } from "./tables.ts";

export const CSI_PACKAGE = "csi.v1";

/** How decoded messages look (see above); also what proto-loader is given where tests use it. */
export const CSI_CONVERSION_OPTIONS: Readonly<IConversionOptions> = Object.freeze({
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});

export type CsiServiceName = "Identity" | "Controller" | "Node";
export const CSI_SERVICE_NAMES: readonly CsiServiceName[] = ["Identity", "Controller", "Node"];

/** A method of csi.proto: grpc-js's definition plus the names of its message types. */
export interface CsiMethodDefinition extends MethodDefinition<object, object> {
  /** Fully qualified, e.g. "csi.v1.CreateVolumeRequest". */
  requestTypeName: string;
  responseTypeName: string;
}

function isMessageType(value: unknown): value is StaticMessageType {
  return typeof value === "function" && typeof (value as Partial<StaticMessageType>).encode === "function";
}

/** What the static code holds under a fully qualified name: a package, message or enum. */
function staticLookup(fullName: string): unknown {
  let found: unknown = staticCode as StaticNamespace;
  for (const part of fullName.split(".")) {
    // Own properties only: a name like "prototype" or "constructor" is not a message.
    found =
      (typeof found === "object" || typeof found === "function") &&
      found !== null &&
      Object.hasOwn(found, part)
        ? (found as StaticNamespace)[part]
        : undefined;
  }
  return found;
}

/** A message's static functions by fully qualified name ("csi.v1.VolumeCapability.MountVolume"). */
export function csiStaticType(fullName: string): StaticMessageType {
  const found = staticLookup(fullName);
  if (!isMessageType(found)) throw new Error(`csi.proto has no message ${fullName}`);
  return found;
}

/**
 * An enum's value names in declaration order, e.g.
 * "csi.v1.ControllerServiceCapability.RPC.Type" -> ["UNKNOWN", "CREATE_DELETE_VOLUME", ...].
 */
export function csiEnumNames(fullName: string): string[] {
  const found = staticLookup(fullName);
  // The static code makes an enum an object of name -> number (numbers -> names sit on its prototype).
  const names =
    typeof found === "object" && found !== null
      ? Object.entries(found).filter(([, value]) => typeof value === "number")
      : [];
  if (names.length === 0) throw new Error(`csi.proto has no enum ${fullName}`);
  return names.sort(([, a], [, b]) => (a as number) - (b as number)).map(([name]) => name);
}

function serializerOf(typeName: string): (value: object) => Buffer {
  const type = csiStaticType(typeName);
  return (value) => {
    // fromObject would read an array's indices as field names and send garbage.
    if (Array.isArray(value)) throw new TypeError(`cannot serialize an array as ${typeName}`);
    const bytes = type.encode(type.fromObject(value as Record<string, unknown>)).finish();
    return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializerOf(typeName: string): (bytes: Buffer) => object {
  const type = csiStaticType(typeName);
  return (bytes) => type.toObject(type.decode(bytes), CSI_CONVERSION_OPTIONS);
}

function methodDefinition(service: CsiServiceName, name: string): CsiMethodDefinition {
  const method = CSI_TABLES.methods[service]?.[name];
  if (method === undefined) throw new Error(`csi.proto has no method ${CSI_PACKAGE}.${service}/${name}`);
  return {
    path: fullMethodName(service, name),
    requestStream: method.requestStream,
    responseStream: method.responseStream,
    requestSerialize: serializerOf(method.request),
    requestDeserialize: deserializerOf(method.request),
    responseSerialize: serializerOf(method.response),
    responseDeserialize: deserializerOf(method.response),
    // The alias makeClientConstructor adds (client.createVolume beside client.CreateVolume).
    originalName: name.charAt(0).toLowerCase() + name.slice(1),
    requestTypeName: method.request,
    responseTypeName: method.response,
  };
}

const services = new Map<CsiServiceName, Record<string, CsiMethodDefinition>>();

/** Methods of one service, for `server.addService(csiServiceDefinition("Controller"), impl)`. */
export function csiServiceDefinition(service: CsiServiceName): Record<string, CsiMethodDefinition> {
  let methods = services.get(service);
  if (methods === undefined) {
    const table = CSI_TABLES.methods[service];
    if (table === undefined) throw new Error(`csi.proto has no service ${CSI_PACKAGE}.${service}`);
    methods = {};
    for (const name of Object.keys(table)) methods[name] = methodDefinition(service, name);
    services.set(service, methods);
  }
  return methods;
}

/** One method: `path` is the full gRPC name, e.g. /csi.v1.Controller/CreateVolume. */
export function csiMethod(service: CsiServiceName, method: string): CsiMethodDefinition {
  const methods = csiServiceDefinition(service);
  const found = Object.hasOwn(methods, method) ? methods[method] : undefined;
  if (found === undefined) throw new Error(`csi.proto has no method ${CSI_PACKAGE}.${service}/${method}`);
  return found;
}

/** The full gRPC method name used on the wire and in metrics. */
export function fullMethodName(service: CsiServiceName, method: string): string {
  return `/${CSI_PACKAGE}.${service}/${method}`;
}

const constructors = new Map<CsiServiceName, ServiceClientConstructor>();

/** A generated-style client class per service (new Controller(target, credentials)). */
export function csiServiceClient(service: CsiServiceName): ServiceClientConstructor {
  let ctor = constructors.get(service);
  if (ctor === undefined) {
    ctor = makeClientConstructor(csiServiceDefinition(service) as ServiceDefinition, service);
    constructors.set(service, ctor);
  }
  return ctor;
}
