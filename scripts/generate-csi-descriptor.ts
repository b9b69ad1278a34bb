// `npm run generate:csi`: shared/csi/csi-descriptor.json, the parsed form of
// shared/csi/csi.proto (and the google/protobuf files it imports) that
// shared/csi/proto.ts loads. Parsing the .proto text at every start cost the
// provisioner and attacher tens of milliseconds of their cold start; the JSON
// is loaded as it is. test/csi/descriptor.test.ts fails when the committed
// file no longer matches csi.proto, so edit the .proto and run this again.

import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
// Loading @grpc/proto-loader registers the google/protobuf files it ships
// (descriptor.proto among them, which csi.proto imports for its options) with
// protobufjs, exactly as when proto-loader parses csi.proto itself.
import "@grpc/proto-loader";
import protobuf from "protobufjs";

export const CSI_PROTO = fileURLToPath(new URL("../shared/csi/csi.proto", import.meta.url));
export const CSI_DESCRIPTOR = fileURLToPath(new URL("../shared/csi/csi-descriptor.json", import.meta.url));

/**
 * csi.proto parsed as @grpc/proto-loader parses it with keepCase false
 * (camelCase field names), cut down to what its services can send and
 * receive: every message and enum a method reaches through its fields.
 * Left out are google/protobuf/descriptor.proto, which csi.proto imports
 * only to declare its option extensions (csi_secret, alpha_field, ...), and
 * those declarations; the options themselves stay on the fields. They were
 * more than half of the file, and a CSI function builds it at every start.
 */
export function csiDescriptorText(): string {
  const root = new protobuf.Root();
  root.loadSync(CSI_PROTO, { keepCase: false });
  root.resolveAll();
  const reached = reachableFromServices(root);
  removeUnreached(root, reached);
  return `${JSON.stringify(root.toJSON({ keepComments: false }))}\n`;
}

type Reachable = protobuf.Type | protobuf.Enum;

function reachableFromServices(root: protobuf.Root): Set<protobuf.ReflectionObject> {
  const reached = new Set<protobuf.ReflectionObject>();
  const visit = (type: Reachable): void => {
    if (reached.has(type)) return;
    reached.add(type);
    if (type instanceof protobuf.Type)
      for (const field of type.fieldsArray) if (field.resolvedType) visit(field.resolvedType);
  };
  const services = (ns: protobuf.NamespaceBase): protobuf.Service[] =>
    ns.nestedArray.flatMap((o) =>
      o instanceof protobuf.Service ? [o] : o instanceof protobuf.Namespace ? services(o) : [],
    );
  for (const service of services(root)) {
    reached.add(service);
    for (const method of service.methodsArray) {
      if (!method.resolvedRequestType || !method.resolvedResponseType)
        throw new Error(`csi.proto: ${method.name} has unresolved message types`);
      visit(method.resolvedRequestType);
      visit(method.resolvedResponseType);
    }
  }
  return reached;
}

/** Drops what no service reaches, extension declarations, then namespaces left empty. */
function removeUnreached(ns: protobuf.NamespaceBase, reached: Set<protobuf.ReflectionObject>): void {
  for (const child of [...ns.nestedArray]) {
    if (child instanceof protobuf.Service) continue;
    if (child instanceof protobuf.Type) {
      // A message no method reaches goes whole; one that is reached keeps only reached nested types.
      if (reached.has(child)) removeUnreached(child, reached);
      else ns.remove(child);
    } else if (child instanceof protobuf.Namespace) {
      removeUnreached(child, reached);
      if (child.nestedArray.length === 0) ns.remove(child);
    } else if (!reached.has(child)) {
      // Enums no field uses, and the option extension fields.
      ns.remove(child);
    }
  }
}

if (import.meta.main) {
  writeFileSync(CSI_DESCRIPTOR, csiDescriptorText());
  process.stdout.write(`${CSI_DESCRIPTOR}\n`);
}
