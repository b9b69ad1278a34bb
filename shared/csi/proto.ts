// csi.proto for grpc-js, built once per process from csi-descriptor.json (its
// parsed form, written by `npm run generate:csi` and checked against the
// .proto by a test): method definitions (path + serializers) for the client,
// service definitions for servers (test fakes), client constructors for
// whoever prefers those, and the message types wire.ts reads its plans from.
//
// Why not @grpc/proto-loader at run time: besides the serializers, it builds
// descriptor protos of every message and encodes whole file descriptors for
// gRPC reflection, which we never serve. That was ~25 ms of a CSI function's
// cold start; protobufjs's own Root does the part we use in a third of it.
// The serializers are the ones proto-loader makes (fromObject + encode,
// decode + toObject with the options below), and test/csi/descriptor.test.ts
// holds them to proto-loader's byte for byte and object for object.
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

import { fileURLToPath } from "node:url";
import type { MethodDefinition, ServiceClientConstructor, ServiceDefinition } from "@grpc/grpc-js";
import { makeClientConstructor } from "@grpc/grpc-js";
// The light build: reflection, encoding and JSON descriptors, without the .proto parser.
import protobuf from "protobufjs/light.js";
import csiDescriptor from "./csi-descriptor.json" with { type: "json" };

export const CSI_PROTO_PATH = fileURLToPath(new URL("./csi.proto", import.meta.url));
export const CSI_PACKAGE = "csi.v1";

/** How decoded messages look (see above); also what proto-loader is given where it is used (tests, sandbox). */
export const CSI_CONVERSION_OPTIONS: Readonly<protobuf.IConversionOptions> = Object.freeze({
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

let root: protobuf.Root | undefined;

/**
 * Every type csi.proto's services use, built on first use. Not resolved as a
 * whole: resolving a type generates its constructor, and a function uses a
 * handful of csi.proto's types, so each method and type is resolved when
 * first used (protobufjs does that for types on their first encode or
 * decode). The descriptor test resolves and checks every one.
 */
function csiRoot(): protobuf.Root {
  // protobufjs's Root.toJSON wrote it, so it is an INamespace by construction; TypeScript sees only literals.
  root ??= protobuf.Root.fromJSON(csiDescriptor as protobuf.INamespace);
  return root;
}

/** A message type by fully qualified name ("csi.v1.Volume"). */
export function csiMessageType(fullName: string): protobuf.Type {
  const found = csiRoot().lookup(fullName);
  if (!(found instanceof protobuf.Type)) throw new Error(`csi.proto has no message ${fullName}`);
  return found;
}

/** A protobufjs full name without its leading dot. */
function qualifiedName(reflected: protobuf.ReflectionObject): string {
  return reflected.fullName.replace(/^\./, "");
}

function serializerOf(type: protobuf.Type): (value: object) => Buffer {
  return (value) => {
    // fromObject would read an array's indices as field names and send garbage.
    if (Array.isArray(value)) throw new TypeError(`cannot serialize an array as ${type.name}`);
    const bytes = type.encode(type.fromObject(value)).finish();
    return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializerOf(type: protobuf.Type): (bytes: Buffer) => object {
  return (bytes) => type.toObject(type.decode(bytes), CSI_CONVERSION_OPTIONS);
}

function methodDefinition(service: protobuf.Service, method: protobuf.Method): CsiMethodDefinition {
  method.resolve();
  const request = method.resolvedRequestType;
  const response = method.resolvedResponseType;
  // resolve() throws for a type the descriptor lacks; null here would be a protobufjs change.
  if (request === null || response === null)
    throw new Error(`csi.proto: ${method.name} has unresolved message types`);
  return {
    path: `/${qualifiedName(service)}/${method.name}`,
    requestStream: method.requestStream === true,
    responseStream: method.responseStream === true,
    requestSerialize: serializerOf(request),
    requestDeserialize: deserializerOf(request),
    responseSerialize: serializerOf(response),
    responseDeserialize: deserializerOf(response),
    // The alias makeClientConstructor adds (client.createVolume beside client.CreateVolume).
    originalName: method.name.charAt(0).toLowerCase() + method.name.slice(1),
    requestTypeName: qualifiedName(request),
    responseTypeName: qualifiedName(response),
  };
}

const services = new Map<CsiServiceName, Record<string, CsiMethodDefinition>>();

/** Methods of one service, for `server.addService(csiServiceDefinition("Controller"), impl)`. */
export function csiServiceDefinition(service: CsiServiceName): Record<string, CsiMethodDefinition> {
  let methods = services.get(service);
  if (methods === undefined) {
    const reflected = csiRoot().lookup(`${CSI_PACKAGE}.${service}`);
    if (!(reflected instanceof protobuf.Service))
      throw new Error(`csi.proto has no service ${CSI_PACKAGE}.${service}`);
    methods = {};
    for (const method of reflected.methodsArray) methods[method.name] = methodDefinition(reflected, method);
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
