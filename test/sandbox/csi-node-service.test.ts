// The sandbox CSI driver's Node service over real gRPC on each node plugin's
// socket: the order a strict driver enforces (ControllerPublish, then
// NodeStage, then NodePublish; unpublish before unstage), idempotent
// repeats, the error codes, the paths made and the state kept across a
// restart.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, it } from "node:test";
import { type CsiDriverHandle, startCsiDriver } from "../../sandbox/csi/server.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { CsiError } from "../../shared/csi/errors.ts";
import {
  blockCap,
  mountCap,
  type RawCsiClient,
  rawCsiClient,
  rejectsWith,
} from "../helpers/csi-driver-client.ts";

const nodeA = "sandbox-node";
const nodeB = "sandbox-node-2";

let dir: string;
let handle: CsiDriverHandle;
let controller: RawCsiClient;
let onA: RawCsiClient;
let onB: RawCsiClient;

async function start(): Promise<void> {
  handle = await startCsiDriver({ dir: join(dir, "csi"), nodes: [nodeA, nodeB] });
  controller = rawCsiClient(handle.endpoint);
  onA = rawCsiClient(handle.nodeEndpoints[nodeA]!);
  onB = rawCsiClient(handle.nodeEndpoints[nodeB]!);
}

async function stop(): Promise<void> {
  for (const c of [controller, onA, onB]) c.close();
  await handle.close();
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-csi-node-"));
  await start();
});
after(async () => {
  await stop();
  await rm(dir, { recursive: true, force: true });
});

let counter = 0;
async function volume(block = false): Promise<string> {
  const created = await controller.call<{ volume: { volume_id: string } }>("Controller", "CreateVolume", {
    name: `pvc-node-${++counter}`,
    volume_capabilities: [block ? blockCap() : mountCap()],
  });
  return created.volume.volume_id;
}

const controllerPublish = (id: string, node: string, block = false) =>
  controller.call("Controller", "ControllerPublishVolume", {
    volume_id: id,
    node_id: node,
    volume_capability: block ? blockCap() : mountCap(),
  });

const paths = (id: string, node: string) => ({
  staging: join(dir, "kubelet", node, "plugins", id, "globalmount"),
  target: join(dir, "kubelet", node, "pods", `pod-of-${id}`, "mount"),
});

const stage = (client: RawCsiClient, id: string, path: string, cap: object = mountCap()) =>
  client.call("Node", "NodeStageVolume", {
    volume_id: id,
    staging_target_path: path,
    volume_capability: cap,
  });
const publish = (
  client: RawCsiClient,
  id: string,
  staging: string,
  target: string,
  cap: object = mountCap(),
) =>
  client.call("Node", "NodePublishVolume", {
    volume_id: id,
    staging_target_path: staging,
    target_path: target,
    volume_capability: cap,
    readonly: false,
  });
const unpublish = (client: RawCsiClient, id: string, target: string) =>
  client.call("Node", "NodeUnpublishVolume", { volume_id: id, target_path: target });
const unstage = (client: RawCsiClient, id: string, path: string) =>
  client.call("Node", "NodeUnstageVolume", { volume_id: id, staging_target_path: path });

const backing = (id: string) => handle.driver.listBackingVolumes().find((v) => v.volumeId === id)!;

describe("node plugins", () => {
  it("each answers NodeGetInfo with its own node id and topology, and advertises STAGE_UNSTAGE_VOLUME and EXPAND_VOLUME", async () => {
    for (const [client, node] of [
      [onA, nodeA],
      [onB, nodeB],
    ] as const) {
      const info = await client.call("Node", "NodeGetInfo");
      assert.equal(info.node_id, node);
      assert.deepEqual(info.accessible_topology, { segments: { "topology.hostpath.csi/node": node } });
      const caps = await client.call<{ capabilities: { rpc: { type: string } }[] }>(
        "Node",
        "NodeGetCapabilities",
      );
      assert.deepEqual(
        caps.capabilities.map((c) => c.rpc.type),
        ["STAGE_UNSTAGE_VOLUME", "EXPAND_VOLUME"],
      );
    }
    // A node plugin serves no Controller service; the controller's socket does.
    await rejectsWith(onB.call("Controller", "ControllerGetCapabilities"), "UNIMPLEMENTED");
  });
});

describe("stage and publish", () => {
  it("goes ControllerPublish -> NodeStage -> NodePublish, records each step and makes the paths", async () => {
    const id = await volume();
    const { staging, target } = paths(id, nodeB);
    await rejectsWith(stage(onB, id, staging), "FAILED_PRECONDITION", /not published to node sandbox-node-2/);
    await controllerPublish(id, nodeB);
    await rejectsWith(publish(onB, id, staging, target), "FAILED_PRECONDITION", /not staged/);
    await stage(onB, id, staging);
    await stage(onB, id, staging); // idempotent
    assert.ok((await stat(staging)).isDirectory());
    await publish(onB, id, staging, target);
    await publish(onB, id, staging, target); // idempotent
    assert.ok((await stat(target)).isDirectory());
    assert.deepEqual(backing(id).staged, [{ node: nodeB, path: staging }]);
    assert.deepEqual(backing(id).nodePublished, [
      { node: nodeB, targetPath: target, readonly: false, stagingPath: staging },
    ]);
    // The same volume is not staged on the other node by any of this.
    await rejectsWith(publish(onA, id, staging, target), "FAILED_PRECONDITION");

    await rejectsWith(unstage(onB, id, staging), "FAILED_PRECONDITION", /still published/);
    await unpublish(onB, id, target);
    await unpublish(onB, id, target); // idempotent
    await assert.rejects(stat(target), { code: "ENOENT" });
    await unstage(onB, id, staging);
    await unstage(onB, id, staging); // idempotent
    await assert.rejects(stat(staging), { code: "ENOENT" });
    assert.deepEqual(backing(id).staged, []);
    assert.deepEqual(backing(id).nodePublished, []);
  });

  it("answers NOT_FOUND, INVALID_ARGUMENT and ALREADY_EXISTS as a strict driver", async () => {
    const { staging, target } = paths("ghost", nodeA);
    await rejectsWith(stage(onA, "ghost", staging), "NOT_FOUND");
    await rejectsWith(publish(onA, "ghost", staging, target), "NOT_FOUND");
    await rejectsWith(unpublish(onA, "ghost", target), "NOT_FOUND");
    await rejectsWith(unstage(onA, "ghost", staging), "NOT_FOUND");

    const id = await volume();
    await controllerPublish(id, nodeA);
    const p = paths(id, nodeA);
    await rejectsWith(
      onA.call("Node", "NodeStageVolume", { volume_id: id, volume_capability: mountCap() }),
      "INVALID_ARGUMENT",
      /staging_target_path missing/,
    );
    await rejectsWith(
      onA.call("Node", "NodeStageVolume", { staging_target_path: p.staging, volume_capability: mountCap() }),
      "INVALID_ARGUMENT",
      /volume_id missing/,
    );
    await rejectsWith(
      onA.call("Node", "NodeStageVolume", { volume_id: id, staging_target_path: p.staging }),
      "INVALID_ARGUMENT",
      /volume_capability missing/,
    );
    await rejectsWith(stage(onA, id, "relative/path"), "INVALID_ARGUMENT", /absolute/);
    await rejectsWith(stage(onA, id, p.staging, blockCap()), "INVALID_ARGUMENT", /mount volume, not block/);
    await stage(onA, id, p.staging);
    await rejectsWith(stage(onA, id, `${p.staging}-elsewhere`), "ALREADY_EXISTS");
    await rejectsWith(
      onA.call("Node", "NodePublishVolume", {
        volume_id: id,
        target_path: p.target,
        volume_capability: mountCap(),
      }),
      "INVALID_ARGUMENT",
      /staging_target_path missing/,
    );
    await rejectsWith(
      onA.call("Node", "NodeUnpublishVolume", { volume_id: id }),
      "INVALID_ARGUMENT",
      /target_path missing/,
    );
    await publish(onA, id, p.staging, p.target);
    await rejectsWith(
      onA.call("Node", "NodePublishVolume", {
        volume_id: id,
        staging_target_path: p.staging,
        target_path: p.target,
        volume_capability: mountCap(),
        readonly: true,
      }),
      "ALREADY_EXISTS",
    );
  });

  it("publishes a block volume as a file at the target path", async () => {
    const id = await volume(true);
    await controllerPublish(id, nodeA, true);
    const p = paths(id, nodeA);
    await stage(onA, id, p.staging, blockCap());
    await publish(onA, id, p.staging, p.target, blockCap());
    assert.ok((await stat(p.target)).isFile());
    await unpublish(onA, id, p.target);
    await assert.rejects(stat(p.target), { code: "ENOENT" });
  });

  it("keeps stagings and publications across a restart of the driver", async () => {
    const id = await volume();
    await controllerPublish(id, nodeB);
    const p = paths(id, nodeB);
    await stage(onB, id, p.staging);
    await publish(onB, id, p.staging, p.target);
    await stop();
    await start();
    assert.deepEqual(backing(id).staged, [{ node: nodeB, path: p.staging }]);
    await rejectsWith(unstage(onB, id, p.staging), "FAILED_PRECONDITION");
    await unpublish(onB, id, p.target);
    await unstage(onB, id, p.staging);
    const admin = (await (await fetch(`${handle.adminUrl}/volumes/${id}`)).json()) as { staged: unknown[] };
    assert.deepEqual(admin.staged, []);
  });
});

describe("configurable node capabilities", () => {
  it("without STAGE_UNSTAGE_VOLUME: NodeStage is UNIMPLEMENTED and NodePublish needs no staging", async () => {
    const other = await startCsiDriver({ dir: join(dir, "nostage"), nodeCapabilities: [] });
    const client = rawCsiClient(other.endpoint);
    try {
      const created = await client.call<{ volume: { volume_id: string } }>("Controller", "CreateVolume", {
        name: "pvc-nostage",
        volume_capabilities: [mountCap()],
      });
      const id = created.volume.volume_id;
      assert.deepEqual(await client.call("Node", "NodeGetCapabilities"), { capabilities: [] });
      const p = paths(id, "sandbox-node");
      await rejectsWith(stage(client, id, p.staging), "UNIMPLEMENTED");
      await client.call("Controller", "ControllerPublishVolume", {
        volume_id: id,
        node_id: "sandbox-node",
        volume_capability: mountCap(),
      });
      await client.call("Node", "NodePublishVolume", {
        volume_id: id,
        target_path: p.target,
        volume_capability: mountCap(),
      });
      assert.equal(other.driver.listBackingVolumes()[0]!.nodePublished[0]!.stagingPath, "");
    } finally {
      client.close();
      await other.close();
    }
  });
});

describe("the standalone driver process", () => {
  it("serves node plugins for CSI_NODES with CSI_NODE_CAPABILITIES and names them in its ready line", async () => {
    const child = spawn(process.execPath, ["sandbox/csi/main.ts"], {
      env: {
        ...process.env,
        CSI_DIR: join(dir, "standalone"),
        CSI_NODES: "node-x",
        CSI_NODE_CAPABILITIES: "",
      },
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        child.once("exit", (code) => reject(new Error(`driver exited early with ${code}`)));
        createInterface({ input: child.stdout! }).once("line", resolve);
      });
      const ready = JSON.parse(line) as { csiNodeEndpoints: Record<string, string> };
      assert.deepEqual(Object.keys(ready.csiNodeEndpoints).sort(), ["node-x", "sandbox-node"]);
      const client = rawCsiClient(ready.csiNodeEndpoints["node-x"]!);
      try {
        assert.equal((await client.call("Node", "NodeGetInfo")).node_id, "node-x");
        assert.deepEqual(await client.call("Node", "NodeGetCapabilities"), { capabilities: [] });
      } finally {
        client.close();
      }
    } finally {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      assert.equal(await exited, 0);
    }
  });
});

describe("the shared CSI client's node calls", () => {
  it("stage, publish, unpublish and unstage through CsiClient, and map errors to CsiError", async () => {
    const client = await CsiClient.connect({ endpoint: handle.nodeEndpoints[nodeB]! });
    try {
      const id = await volume();
      await controllerPublish(id, nodeB);
      const p = paths(id, nodeB);
      const capability = {
        mount: { fsType: "ext4", mountFlags: [] },
        accessMode: { mode: "SINGLE_NODE_WRITER" as const },
      };
      await client.nodeStageVolume({
        volumeId: id,
        stagingTargetPath: p.staging,
        volumeCapability: capability,
      });
      await client.nodePublishVolume({
        volumeId: id,
        stagingTargetPath: p.staging,
        targetPath: p.target,
        volumeCapability: capability,
        volumeContext: { a: "b" },
      });
      assert.equal(backing(id).nodePublished.length, 1);
      await assert.rejects(
        client.nodeUnstageVolume({ volumeId: id, stagingTargetPath: p.staging }),
        (err: unknown) => err instanceof CsiError && /still published/.test(err.message),
      );
      await client.nodeUnpublishVolume({ volumeId: id, targetPath: p.target });
      await client.nodeUnstageVolume({ volumeId: id, stagingTargetPath: p.staging });
      assert.deepEqual(backing(id).staged, []);
    } finally {
      client.close();
    }
  });
});
