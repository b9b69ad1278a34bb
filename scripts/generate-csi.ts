// `npm run generate:csi`: csi.proto made ahead of time into what
// shared/csi/proto.ts and wire.ts load, so that a CSI function's cold start
// does not parse, reflect or generate anything (together ~40 ms of it):
//   - csi-descriptor.json: csi.proto parsed (and the google/protobuf files it
//     imports), cut down to what its services send and receive; the other
//     two are made from it, and the tests read it;
//   - csi-static.js: encode, decode, fromObject and toObject of every message
//     in it as plain functions (protobufjs-cli's static-module target). Built
//     at run time, protobufjs makes them with new Function, which no code
//     cache can keep; these come from the bundle like other code;
//   - csi-tables.json: each method's path, streaming and message types, and
//     each message's int64 and message fields (wire.ts's decoding plan).
// test/csi/descriptor.test.ts fails when a committed file no longer matches
// csi.proto, so edit the .proto and run this again.

import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
// Loading @grpc/proto-loader registers the google/protobuf files it ships
// (descriptor.proto among them, which csi.proto imports for its options) with
// protobufjs, exactly as when proto-loader parses csi.proto itself.
import "@grpc/proto-loader";
import protobuf from "protobufjs";
import type { CsiFieldPlan, CsiMethodTable, CsiTables, CsiValuePlan } from "../shared/csi/tables.ts";

export const CSI_PROTO = fileURLToPath(new URL("../shared/csi/csi.proto", import.meta.url));
export const CSI_DESCRIPTOR = fileURLToPath(new URL("../shared/csi/csi-descriptor.json", import.meta.url));
export const CSI_STATIC = fileURLToPath(new URL("../shared/csi/csi-static.js", import.meta.url));
export const CSI_TABLES = fileURLToPath(new URL("../shared/csi/csi-tables.json", import.meta.url));

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
  for (const service of nestedOfKind(root, protobuf.Service)) {
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

/** The reflected root of the descriptor text, every type resolved. */
function resolvedRoot(descriptorText: string): protobuf.Root {
  const root = protobuf.Root.fromJSON(JSON.parse(descriptorText) as protobuf.INamespace);
  root.resolveAll();
  return root;
}

/** A protobufjs full name without its leading dot. */
function qualifiedName(reflected: protobuf.ReflectionObject): string {
  return reflected.fullName.replace(/^\./, "");
}

/** protobufjs's names of the 64-bit integer types (map values and fields alike). */
const INT64_TYPES = new Set(["int64", "uint64", "sint64", "fixed64", "sfixed64"]);

/** A field's (or map value's) type as wire.ts decodes it: int64, a message, or copied as is. */
function valuePlan(field: protobuf.Field): CsiValuePlan {
  if (INT64_TYPES.has(field.type)) return { kind: "int64" };
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Type) return { kind: "message", typeName: qualifiedName(resolved) };
  return { kind: "copy" };
}

function fieldPlans(type: protobuf.Type): CsiFieldPlan[] {
  const plan: CsiFieldPlan[] = [];
  for (const field of type.fieldsArray) {
    const value = valuePlan(field);
    // A map field's type is its value type; protobufjs keeps the key type apart.
    if (field.map) {
      if (value.kind !== "copy") plan.push({ name: field.name, kind: "map", value });
    } else if (value.kind === "int64") {
      plan.push({ name: field.name, repeated: field.repeated, kind: "int64" });
    } else if (value.kind === "message") {
      plan.push({ name: field.name, repeated: field.repeated, kind: "message", typeName: value.typeName });
    }
  }
  return plan;
}

/** Everything of `kind` under `ns`, at any depth (messages nest in packages and in messages). */
export function nestedOfKind<T extends protobuf.ReflectionObject>(
  ns: protobuf.NamespaceBase,
  kind: abstract new (...args: never[]) => T,
): T[] {
  return ns.nestedArray.flatMap((o) => [
    ...(o instanceof kind ? [o] : []),
    ...(o instanceof protobuf.Namespace || o instanceof protobuf.Type ? nestedOfKind(o, kind) : []),
  ]);
}

/** csi-tables.json from the descriptor text: the methods of each service and every message's plan. */
export function csiTablesText(descriptorText: string): string {
  const root = resolvedRoot(descriptorText);
  const tables: CsiTables = { methods: {}, messages: {} };
  for (const service of nestedOfKind(root, protobuf.Service)) {
    const methods: Record<string, CsiMethodTable> = {};
    for (const method of service.methodsArray) {
      const request = method.resolvedRequestType;
      const response = method.resolvedResponseType;
      if (request === null || response === null)
        throw new Error(`csi.proto: ${method.name} has unresolved message types`);
      methods[method.name] = {
        request: qualifiedName(request),
        response: qualifiedName(response),
        requestStream: method.requestStream === true,
        responseStream: method.responseStream === true,
      };
    }
    tables.methods[service.name] = methods;
  }
  for (const type of nestedOfKind(root, protobuf.Type))
    tables.messages[qualifiedName(type)] = fieldPlans(type);
  return `${JSON.stringify(tables)}\n`;
}

/** The line of protobufjs-cli's ES module wrapper that imports the runtime, and what replaces it. */
const WRAPPER_IMPORT = 'import * as $protobuf from "protobufjs/minimal.js";';
// protobufjs/minimal is CommonJS whose exports Node cannot name statically:
// a namespace import would see only `default`.
const RUNTIME_IMPORT = 'import $protobuf from "protobufjs/minimal.js";';
const STATIC_HEADER =
  "// Generated by `npm run generate:csi` from csi-descriptor.json (protobufjs-cli, static-module). Do not edit.\n";

/** csi-static.js: protobufjs-cli's static code for every message of the descriptor file. */
export async function csiStaticText(descriptorFile = CSI_DESCRIPTOR): Promise<string> {
  // protobufjs-cli is CommonJS without types; main(args, callback) hands the output to the callback.
  const { pbjs } = createRequire(import.meta.url)("protobufjs-cli") as {
    pbjs: { main(args: string[], callback: (err: Error | null, output?: string) => void): void };
  };
  const output = await new Promise<string>((resolve, reject) =>
    pbjs.main(
      [
        ...["--target", "static-module", "--wrap", "es6", "--dependency", "protobufjs/minimal.js"],
        // Its own entry in protobufjs's registry of roots, not the shared "default".
        ...["--root", "csi"],
        // What proto.ts's serializers use: encode, decode, fromObject, toObject.
        ...["--no-create", "--no-verify", "--no-delimited", "--no-typeurl", "--no-comments", "--no-service"],
        descriptorFile,
      ],
      (err, text) => (err ? reject(err) : resolve(text ?? "")),
    ),
  );
  if (!output.includes(WRAPPER_IMPORT)) throw new Error("protobufjs-cli's es6 wrapper changed its import");
  return STATIC_HEADER + output.replace(WRAPPER_IMPORT, RUNTIME_IMPORT);
}

if (import.meta.main) {
  const descriptor = csiDescriptorText();
  writeFileSync(CSI_DESCRIPTOR, descriptor);
  writeFileSync(CSI_STATIC, await csiStaticText(CSI_DESCRIPTOR));
  writeFileSync(CSI_TABLES, csiTablesText(descriptor));
  for (const file of [CSI_DESCRIPTOR, CSI_STATIC, CSI_TABLES]) process.stdout.write(`${file}\n`);
}
