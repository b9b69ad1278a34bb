// The proto loading, wire conversion, secret redaction and capability
// helpers on their own, without a server.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { CSI_PROTO } from "../../scripts/generate-csi.ts";
import { capabilitiesFrom } from "../../shared/csi/capabilities.ts";
import {
  CSI_SERVICE_NAMES,
  csiEnumNames,
  csiMethod,
  csiServiceClient,
  csiServiceDefinition,
  fullMethodName,
} from "../../shared/csi/proto.ts";
import { redactSecrets, SECRET_FIELDS, STRIPPED } from "../../shared/csi/redact.ts";
import type { CreateVolumeRequest } from "../../shared/csi/types.ts";
import { fromWire, toWire } from "../../shared/csi/wire.ts";

test("every (csi_secret) field in csi.proto is one redactSecrets knows", () => {
  const proto = readFileSync(CSI_PROTO, "utf8");
  const marked = [...proto.matchAll(/(\w+)\s*=\s*\d+\s*\[\s*\(csi_secret\)\s*=\s*true\s*\]/g)].map(
    (m) => m[1],
  );
  assert.ok(marked.length >= 8, "found the marked fields");
  for (const field of marked) assert.ok(SECRET_FIELDS.has(String(field)), `${field} is redacted`);
});

test("every method's response is <Method>Response and its path is the full gRPC name", () => {
  for (const service of CSI_SERVICE_NAMES) {
    for (const [method, definition] of Object.entries(csiServiceDefinition(service))) {
      assert.equal(definition.path, fullMethodName(service, method));
      assert.equal(definition.responseTypeName, `csi.v1.${method}Response`);
      assert.doesNotThrow(() => fromWire(definition.responseTypeName, {}), method);
    }
  }
  assert.equal(csiMethod("Controller", "CreateVolume").path, "/csi.v1.Controller/CreateVolume");
  assert.throws(() => csiMethod("Controller", "NoSuchCall"), /no method/);
  assert.equal(typeof csiServiceClient("Identity"), "function");
  assert.equal(csiServiceDefinition("Node"), csiServiceDefinition("Node"), "built once per process");
});

test("csiEnumNames lists an enum's value names in csi.proto's order, and refuses what is no enum", () => {
  assert.deepEqual(csiEnumNames("csi.v1.PluginCapability.VolumeExpansion.Type"), [
    "UNKNOWN",
    "ONLINE",
    "OFFLINE",
  ]);
  assert.deepEqual(csiEnumNames("csi.v1.VolumeCapability.AccessMode.Mode"), [
    "UNKNOWN",
    "SINGLE_NODE_WRITER",
    "SINGLE_NODE_READER_ONLY",
    "MULTI_NODE_READER_ONLY",
    "MULTI_NODE_SINGLE_WRITER",
    "MULTI_NODE_MULTI_WRITER",
    "SINGLE_NODE_SINGLE_WRITER",
    "SINGLE_NODE_MULTI_WRITER",
  ]);
  for (const name of ["csi.v1", "csi.v1.Volume", "csi.v1.NoSuchEnum", "csi.v1.Volume.prototype", ""]) {
    assert.throws(() => csiEnumNames(name), /no enum/, name);
  }
});

test("fromWire turns int64 strings into bigint at any depth and drops absent messages", () => {
  const method = csiMethod("Controller", "GetCapacity");
  const decoded = method.responseDeserialize(
    method.responseSerialize({
      availableCapacity: "18446744073709551",
      maximumVolumeSize: { value: "9007199254740993" },
    }),
  );
  assert.deepEqual(fromWire("csi.v1.GetCapacityResponse", decoded), {
    availableCapacity: 18446744073709551n,
    maximumVolumeSize: { value: 9007199254740993n },
  });

  assert.deepEqual(
    fromWire("csi.v1.ListSnapshotsResponse", {
      entries: [
        { snapshot: { sizeBytes: "-1", creationTime: { seconds: "12", nanos: 3 }, snapshotId: "s" } },
      ],
      nextToken: "",
    }),
    {
      entries: [{ snapshot: { sizeBytes: -1n, creationTime: { seconds: 12n, nanos: 3 }, snapshotId: "s" } }],
      nextToken: "",
    },
  );
  assert.throws(() => fromWire("csi.v1.Volume", null), /expected a decoded csi.v1.Volume/);
  assert.throws(() => fromWire("csi.v1.NoSuchMessage", {}), /no message/);
});

test("toWire encodes bigint as exact decimal strings and leaves the input alone", () => {
  const request: CreateVolumeRequest = {
    name: "n",
    capacityRange: { requiredBytes: 2n ** 63n - 1n },
    volumeCapabilities: [{ block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
  };
  const wire = toWire(request);
  assert.deepEqual(wire.capacityRange, { requiredBytes: "9223372036854775807" });
  assert.equal(request.capacityRange?.requiredBytes, 2n ** 63n - 1n);
  const method = csiMethod("Controller", "CreateVolume");
  const back = method.requestDeserialize(method.requestSerialize(wire)) as {
    capacityRange: { requiredBytes: string };
  };
  assert.equal(back.capacityRange.requiredBytes, "9223372036854775807");
});

test("redactSecrets strips secret values at any depth, keeps keys, does not mutate", () => {
  const request = {
    volumeId: "v",
    secrets: { password: "hunter2", token: "t" },
    nested: [{ secrets: { key: "k" } }, { other: { secrets: {} } }],
    capacity: 5n,
    parameters: { "csi.storage.k8s.io/provisioner-secret-name": "name-is-not-a-secret" },
  };
  const safe = redactSecrets(request);
  assert.deepEqual(safe, {
    volumeId: "v",
    secrets: { password: STRIPPED, token: STRIPPED },
    nested: [{ secrets: { key: STRIPPED } }, { other: { secrets: {} } }],
    capacity: 5n,
    parameters: { "csi.storage.k8s.io/provisioner-secret-name": "name-is-not-a-secret" },
  });
  assert.equal(request.secrets.password, "hunter2");
  assert.deepEqual(redactSecrets({ secrets: "odd" }), { secrets: STRIPPED });
  assert.deepEqual(redactSecrets({ secrets: undefined }), { secrets: undefined });
});

test("capabilitiesFrom: controller capabilities count only with a controller service", () => {
  const rpcs = (...types: string[]) => types.map((type) => ({ rpc: { type } })) as never[];
  const all = capabilitiesFrom(
    [
      { service: { type: "CONTROLLER_SERVICE" } },
      { service: { type: "VOLUME_ACCESSIBILITY_CONSTRAINTS" } },
      { volumeExpansion: { type: "OFFLINE" } },
    ],
    rpcs(
      "CREATE_DELETE_VOLUME",
      "PUBLISH_UNPUBLISH_VOLUME",
      "PUBLISH_READONLY",
      "LIST_VOLUMES",
      "LIST_VOLUMES_PUBLISHED_NODES",
      "CLONE_VOLUME",
      "CREATE_DELETE_SNAPSHOT",
      "EXPAND_VOLUME",
      "SINGLE_NODE_MULTI_WRITER",
      "GET_CAPACITY",
    ),
  );
  for (const key of [
    "controllerService",
    "accessibilityConstraints",
    "offlineExpansion",
    "createDeleteVolume",
    "publishUnpublishVolume",
    "publishReadonly",
    "listVolumes",
    "listVolumesPublishedNodes",
    "cloneVolume",
    "createDeleteSnapshot",
    "expandVolume",
    "singleNodeMultiWriter",
    "getCapacity",
  ] as const) {
    assert.equal(all[key], true, key);
  }
  assert.equal(all.onlineExpansion, false);
  assert.equal(all.listSnapshots, false);

  const noController = capabilitiesFrom([], rpcs("CREATE_DELETE_VOLUME"));
  assert.equal(noController.controllerService, false);
  assert.equal(noController.createDeleteVolume, false);
});
