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

/** csi.proto parsed as @grpc/proto-loader parses it with keepCase false: camelCase field names. */
export function csiDescriptorText(): string {
  const root = new protobuf.Root();
  root.loadSync(CSI_PROTO, { keepCase: false });
  root.resolveAll();
  return `${JSON.stringify(root.toJSON({ keepComments: false }))}\n`;
}

if (import.meta.main) {
  writeFileSync(CSI_DESCRIPTOR, csiDescriptorText());
  process.stdout.write(`${CSI_DESCRIPTOR}\n`);
}
