// shared/csi/csi-descriptor.json is csi.proto parsed ahead of time (npm run
// generate:csi). It must say exactly what the .proto says, and load into the
// same package definition proto-loader makes from the .proto itself.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { loadSync, type MethodDefinition } from "@grpc/proto-loader";
import { CSI_DESCRIPTOR, csiDescriptorText } from "../../scripts/generate-csi-descriptor.ts";
import { CSI_LOADER_OPTIONS, CSI_PROTO_PATH, csiPackageDefinition } from "../../shared/csi/proto.ts";

test("the committed descriptor is csi.proto as it is now (else: npm run generate:csi)", () => {
  // Parsed, not as text: the repository's formatter lays the file out its own way.
  assert.deepEqual(JSON.parse(readFileSync(CSI_DESCRIPTOR, "utf8")), JSON.parse(csiDescriptorText()));
});

test("the descriptor gives the package definition proto-loader makes from csi.proto", () => {
  const fromProto = loadSync(CSI_PROTO_PATH, { ...CSI_LOADER_OPTIONS });
  const fromDescriptor = csiPackageDefinition();
  assert.deepEqual(Object.keys(fromDescriptor).sort(), Object.keys(fromProto).sort());
  for (const [name, expected] of Object.entries(fromProto)) {
    const actual = fromDescriptor[name];
    if ("format" in expected) {
      // Messages and enums: the same descriptor (field names, numbers, types, options).
      assert.deepEqual(JSON.parse(JSON.stringify(actual)), JSON.parse(JSON.stringify(expected)), name);
      continue;
    }
    // Services: the same methods on the same paths with the same message types.
    const typeName = (t: { type: unknown }) => (t.type as { name?: string }).name;
    const summary = (service: object) =>
      Object.entries(service as Record<string, MethodDefinition<object, object>>).map(([method, d]) => [
        method,
        d.path,
        d.requestStream,
        d.responseStream,
        typeName(d.requestType),
        typeName(d.responseType),
      ]);
    assert.deepEqual(summary(actual as object), summary(expected), name);
  }
});
