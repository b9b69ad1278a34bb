// The sandbox CSI driver and the functions' CSI client share one message
// model: the driver's handlers receive shared/csi/types.ts shapes (camelCase,
// exact bigint int64, absent messages left out) whatever spelling the caller
// used, and the driver never loads a second model of csi.proto.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import type { CsiMethodName, CsiRequest } from "../../sandbox/csi/driver.ts";
import { type CsiDriverHandle, startCsiDriver } from "../../sandbox/csi/server.ts";
import { mountCap, type RawCsiClient, rawCsiClient, rejectsWith } from "../helpers/csi-driver-client.ts";

const GiB = 1024 ** 3;
/** 2^53 + 1: a Number would round it. */
const beyondDoubles = "9007199254740993";

let dir: string;
let handle: CsiDriverHandle;
let csi: RawCsiClient;
const received: { method: CsiMethodName; request: unknown }[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-csi-model-"));
  handle = await startCsiDriver({ dir, maxVolumeBytes: 10 * GiB, totalCapacityBytes: 20 * GiB });
  // Record what the gRPC binding hands the driver.
  const invoke = handle.driver.invoke.bind(handle.driver);
  handle.driver.invoke = <M extends CsiMethodName>(method: M, request: CsiRequest<M>, node?: string) => {
    received.push({ method, request });
    return invoke(method, request, node);
  };
  csi = rawCsiClient(handle.endpoint);
});

after(async () => {
  csi.close();
  await handle.close();
  await rm(dir, { recursive: true, force: true });
});

const lastRequest = (method: CsiMethodName): unknown =>
  received.findLast((r) => r.method === method)?.request;

describe("one CSI message model", () => {
  it("hands the driver a snake_case wire request as shared/csi/types.ts shapes", async () => {
    const created = await csi.call<{ volume: { volume_id: string; capacity_bytes: string } }>(
      "Controller",
      "CreateVolume",
      {
        name: "pvc-model",
        capacity_range: { required_bytes: String(GiB) },
        volume_capabilities: [mountCap()],
        parameters: { tier: "gold" },
      },
    );
    assert.deepEqual(lastRequest("CreateVolume"), {
      name: "pvc-model",
      capacityRange: { requiredBytes: BigInt(GiB), limitBytes: 0n },
      volumeCapabilities: [
        {
          accessType: "mount",
          mount: { fsType: "ext4", mountFlags: [], volumeMountGroup: "" },
          accessMode: { mode: "SINGLE_NODE_WRITER" },
        },
      ],
      parameters: { tier: "gold" },
      secrets: {},
      mutableParameters: {},
    });
    // And the answer goes out through the same serializers: int64 as the raw client decodes it.
    assert.equal(created.volume.capacity_bytes, String(GiB));

    await rejectsWith(
      csi.call("Controller", "ControllerExpandVolume", {
        volume_id: created.volume.volume_id,
        capacity_range: { required_bytes: beyondDoubles },
      }),
      "OUT_OF_RANGE",
      /exceeds the maximum volume size/,
    );
    const expand = lastRequest("ControllerExpandVolume") as { capacityRange?: { requiredBytes?: bigint } };
    assert.equal(expand.capacityRange?.requiredBytes, BigInt(beyondDoubles), "int64 arrives exact");
  });

  it("leaves absent sub-messages out instead of null", async () => {
    await csi.call("Node", "NodeGetInfo");
    await csi.call("Controller", "GetCapacity", {});
    const capacity = lastRequest("GetCapacity") as Record<string, unknown>;
    assert.equal("accessibleTopology" in capacity, false);
    assert.deepEqual(capacity, { volumeCapabilities: [], parameters: {} });
  });

  it("loads no second model of csi.proto (no @grpc/proto-loader) when it starts and serves", async () => {
    // A fresh process, so modules the tests themselves load do not count.
    const script = `
      import { registerHooks } from "node:module";
      const seen = new Set();
      registerHooks({ resolve(specifier, context, next) { seen.add(specifier); return next(specifier, context); } });
      const { startCsiDriver } = await import(${JSON.stringify(new URL("../../sandbox/csi/server.ts", import.meta.url).href)});
      const { CsiClient } = await import(${JSON.stringify(new URL("../../shared/csi/client.ts", import.meta.url).href)});
      const handle = await startCsiDriver({ dir: process.argv[1] });
      const client = new CsiClient({ endpoint: handle.endpoint });
      await client.createVolume({ name: "v", volumeCapabilities: [{ mount: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } }] });
      client.close();
      await handle.close();
      console.log(JSON.stringify([...seen]));
    `;
    const child = join(dir, "child");
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--input-type=module", "-e", script, child],
      { timeout: 60_000 },
    );
    const specifiers = JSON.parse(stdout.trim().split("\n").at(-1) ?? "[]") as string[];
    assert.ok(
      specifiers.some((s) => s.endsWith("csi-static.js")),
      "the shared static serializers load",
    );
    assert.deepEqual(
      specifiers.filter((s) => s.includes("proto-loader") || s.endsWith(".proto")),
      [],
    );
  });
});
