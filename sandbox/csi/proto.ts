// Loads the project's csi.proto for the sandbox driver (and for tests that
// want a raw grpc-js client). Decoding options match messages.ts: field
// names as in the proto, enums as names, int64 as decimal strings, defaults
// filled in, and the name of the set oneof member as a virtual field.
import { fileURLToPath } from "node:url";
import { loadPackageDefinition, type ServiceClientConstructor, type ServiceDefinition } from "@grpc/grpc-js";
import { loadSync, type PackageDefinition } from "@grpc/proto-loader";

export const csiProtoPath = fileURLToPath(new URL("../../shared/csi/csi.proto", import.meta.url));

export type CsiServiceName = "Identity" | "Controller" | "Node";

let cached: PackageDefinition | undefined;

export function csiPackageDefinition(): PackageDefinition {
  cached ??= loadSync(csiProtoPath, {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return cached;
}

export function csiService(name: CsiServiceName): ServiceDefinition {
  const def = csiPackageDefinition()[`csi.v1.${name}`];
  if (!def || "format" in def) throw new Error(`csi.proto has no service csi.v1.${name}`);
  return def as ServiceDefinition;
}

/** A grpc-js client constructor for one service (tests use it over the real socket). */
export function csiClientConstructor(name: CsiServiceName): ServiceClientConstructor {
  const pkg = loadPackageDefinition(csiPackageDefinition()) as unknown as {
    csi: { v1: Record<CsiServiceName, ServiceClientConstructor> };
  };
  return pkg.csi.v1[name];
}
