// Loads our csi.proto once per process and hands out what grpc-js needs:
// (from csi-descriptor.json, its parsed form, written by `npm run
// generate:csi` and checked against the .proto by a test: parsing the text
// at every start was a large part of a CSI function's cold start)
// method definitions (path + serializers) for the client, service
// definitions for servers (the sandbox driver, test fakes), and classic
// generated-style client constructors for whoever prefers those.
//
// Loader options, and why:
//   keepCase: false  -> camelCase field names (volumeId), the idiomatic JS
//                       spelling and the protobuf JSON mapping's names.
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
import type { ServiceClientConstructor } from "@grpc/grpc-js";
import { makeClientConstructor } from "@grpc/grpc-js";
import type { MethodDefinition, Options, PackageDefinition, ServiceDefinition } from "@grpc/proto-loader";
import { fromJSON } from "@grpc/proto-loader";
import csiDescriptor from "./csi-descriptor.json" with { type: "json" };

export type { MethodDefinition, PackageDefinition, ServiceDefinition } from "@grpc/proto-loader";

export const CSI_PROTO_PATH = fileURLToPath(new URL("./csi.proto", import.meta.url));
export const CSI_PACKAGE = "csi.v1";

export const CSI_LOADER_OPTIONS: Readonly<Options> = Object.freeze({
  keepCase: false,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});

export type CsiServiceName = "Identity" | "Controller" | "Node";
export const CSI_SERVICE_NAMES: readonly CsiServiceName[] = ["Identity", "Controller", "Node"];

let definition: PackageDefinition | undefined;

/** The package definition of csi.proto, built on first use (synchronously, ~20 ms). */
export function csiPackageDefinition(): PackageDefinition {
  // protobufjs's Root.toJSON wrote it, so it is an INamespace by construction; TypeScript sees only literals.
  definition ??= fromJSON(csiDescriptor as unknown as Parameters<typeof fromJSON>[0], {
    ...CSI_LOADER_OPTIONS,
  });
  return definition;
}

function isServiceDefinition(value: unknown): value is ServiceDefinition {
  // Message and enum definitions carry a `format`; services are plain method maps.
  return typeof value === "object" && value !== null && !("format" in value);
}

/** Methods of one service, for `server.addService(csiServiceDefinition("Controller"), impl)`. */
export function csiServiceDefinition(service: CsiServiceName): ServiceDefinition {
  const found = csiPackageDefinition()[`${CSI_PACKAGE}.${service}`];
  if (!isServiceDefinition(found)) throw new Error(`csi.proto has no service ${CSI_PACKAGE}.${service}`);
  return found;
}

/** One method: `path` is the full gRPC name, e.g. /csi.v1.Controller/CreateVolume. */
export function csiMethod(service: CsiServiceName, method: string): MethodDefinition<object, object> {
  const found = csiServiceDefinition(service)[method];
  if (found === undefined) throw new Error(`csi.proto has no method ${CSI_PACKAGE}.${service}/${method}`);
  return found;
}

/** The full gRPC method name used on the wire and in metrics. */
export function fullMethodName(service: CsiServiceName, method: string): string {
  return `/${CSI_PACKAGE}.${service}/${method}`;
}

/**
 * Every CSI response message is `<Method>Response` in package csi.v1; the
 * fully qualified name lets wire.ts find its descriptor.
 */
export function responseTypeName(method: string): string {
  return `${CSI_PACKAGE}.${method}Response`;
}

export function requestTypeName(method: string): string {
  return `${CSI_PACKAGE}.${method}Request`;
}

const constructors = new Map<CsiServiceName, ServiceClientConstructor>();

/** A generated-style client class per service (new Controller(target, credentials)). */
export function csiServiceClient(service: CsiServiceName): ServiceClientConstructor {
  let ctor = constructors.get(service);
  if (ctor === undefined) {
    ctor = makeClientConstructor(csiServiceDefinition(service), service);
    constructors.set(service, ctor);
  }
  return ctor;
}
