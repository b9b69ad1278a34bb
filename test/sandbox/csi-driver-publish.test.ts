// ControllerPublishVolume / ControllerUnpublishVolume tracking and
// ListVolumes pagination with published nodes, over real gRPC.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type CsiDriverHandle, startCsiDriver } from "../../sandbox/csi/server.ts";
import {
  blockCap,
  mountCap,
  type RawCsiClient,
  rawCsiClient,
  rejectsWith,
} from "../helpers/csi-driver-client.ts";

let dir: string;
let handle: CsiDriverHandle;
let csi: RawCsiClient;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-csi-pub-"));
  handle = await startCsiDriver({ dir });
  csi = rawCsiClient(handle.endpoint);
});

after(async () => {
  csi.close();
  await handle.close();
  await rm(dir, { recursive: true, force: true });
});

async function volume(name: string, cap = mountCap()): Promise<string> {
  const res = await csi.call<{ volume: { volume_id: string } }>("Controller", "CreateVolume", {
    name,
    capacity_range: { required_bytes: 1024 * 1024 },
    volume_capabilities: [cap],
  });
  return res.volume.volume_id;
}

const publish = (volume_id: string, node_id: string, cap = mountCap(), readonly = false) =>
  csi.call<{ publish_context: Record<string, string> }>("Controller", "ControllerPublishVolume", {
    volume_id,
    node_id,
    volume_capability: cap,
    readonly,
  });

const unpublish = (volume_id: string, node_id = "") =>
  csi.call("Controller", "ControllerUnpublishVolume", { volume_id, node_id });

describe("ControllerPublishVolume / ControllerUnpublishVolume", () => {
  it("tracks published nodes; repeats are idempotent", async () => {
    const id = await volume("pub-1");
    const first = await publish(id, "node-a");
    assert.ok(first.publish_context.volumePath);
    assert.deepEqual(await publish(id, "node-a"), first);
    assert.deepEqual(handle.driver.publishedNodes(id), ["node-a"]);
    await unpublish(id, "node-a");
    assert.deepEqual(handle.driver.publishedNodes(id), []);
    await unpublish(id, "node-a");
    await unpublish("no-such-volume", "node-a");
  });

  it("refuses a SINGLE_NODE_WRITER volume on a second node with FAILED_PRECONDITION naming the first", async () => {
    const id = await volume("pub-single");
    await publish(id, "node-a");
    await rejectsWith(publish(id, "node-b"), "FAILED_PRECONDITION", /node-a/);
    assert.deepEqual(handle.driver.publishedNodes(id), ["node-a"]);
    await unpublish(id, "node-a");
    await publish(id, "node-b");
    assert.deepEqual(handle.driver.publishedNodes(id), ["node-b"]);
  });

  it("lets multi-node volumes go to many nodes, with one writer for MULTI_NODE_SINGLE_WRITER", async () => {
    const id = await volume("pub-multi", mountCap("MULTI_NODE_MULTI_WRITER"));
    for (const node of ["node-a", "node-b", "node-c"])
      await publish(id, node, mountCap("MULTI_NODE_MULTI_WRITER"));
    assert.deepEqual(handle.driver.publishedNodes(id), ["node-a", "node-b", "node-c"]);
    await unpublish(id);
    assert.deepEqual(handle.driver.publishedNodes(id), [], "no node id: unpublished from every node");

    const sw = await volume("pub-single-writer");
    const cap = mountCap("MULTI_NODE_SINGLE_WRITER");
    await publish(sw, "node-a", cap);
    await publish(sw, "node-b", cap, true);
    await rejectsWith(publish(sw, "node-c", cap), "FAILED_PRECONDITION", /single writer on node node-a/);
  });

  it("answers ALREADY_EXISTS for the same node with another mode or readonly flag", async () => {
    const id = await volume("pub-conflict");
    await publish(id, "node-a");
    await rejectsWith(publish(id, "node-a", mountCap(), true), "ALREADY_EXISTS");
    await rejectsWith(publish(id, "node-a", mountCap("SINGLE_NODE_READER_ONLY")), "ALREADY_EXISTS");
  });

  it("validates the request and answers NOT_FOUND for an unknown volume", async () => {
    const id = await volume("pub-validate");
    await rejectsWith(publish("no-such-volume", "node-a"), "NOT_FOUND");
    await rejectsWith(publish("", "node-a"), "INVALID_ARGUMENT", /volume_id missing/);
    await rejectsWith(publish(id, ""), "INVALID_ARGUMENT", /node_id missing/);
    await rejectsWith(
      csi.call("Controller", "ControllerPublishVolume", { volume_id: id, node_id: "node-a" }),
      "INVALID_ARGUMENT",
      /volume_capability missing/,
    );
    await rejectsWith(publish(id, "node-a", blockCap()), "INVALID_ARGUMENT", /mount volume/);
    await rejectsWith(unpublish(""), "INVALID_ARGUMENT", /volume_id missing/);
  });

  it("refuses to delete a volume that is still published", async () => {
    const id = await volume("pub-delete");
    await publish(id, "node-a");
    await rejectsWith(
      csi.call("Controller", "DeleteVolume", { volume_id: id }),
      "FAILED_PRECONDITION",
      /node-a/,
    );
    await unpublish(id, "node-a");
    await csi.call("Controller", "DeleteVolume", { volume_id: id });
  });
});

describe("ListVolumes", () => {
  type List = {
    entries: { volume: { volume_id: string }; status: { published_node_ids: string[] } }[];
    next_token: string;
  };

  it("pages through every volume with its published nodes", async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 7; i++) ids.add(await volume(`list-${i}`));
    const published = [...ids][3]!;
    await publish(published, "node-x");
    const all = handle.driver.listBackingVolumes();

    const seen = new Map<string, string[]>();
    let token = "";
    let pages = 0;
    do {
      const page: List = await csi.call<List>("Controller", "ListVolumes", {
        max_entries: 3,
        starting_token: token,
      });
      assert.ok(page.entries.length <= 3);
      for (const e of page.entries) {
        assert.ok(!seen.has(e.volume.volume_id), "no entry twice");
        seen.set(e.volume.volume_id, e.status.published_node_ids);
      }
      token = page.next_token;
      pages++;
    } while (token);
    assert.equal(seen.size, all.length);
    assert.equal(pages, Math.ceil(all.length / 3));
    assert.deepEqual(seen.get(published), ["node-x"]);

    const everything = await csi.call<List>("Controller", "ListVolumes", {});
    assert.equal(everything.entries.length, all.length);
    assert.equal(everything.next_token, "");
  });

  it("keeps paging correctly when volumes are deleted between pages", async () => {
    const first = await csi.call<List>("Controller", "ListVolumes", { max_entries: 2 });
    const total = handle.driver.listBackingVolumes().length;
    const doomed = first.entries[1]!.volume.volume_id;
    await unpublish(doomed);
    await csi.call("Controller", "DeleteVolume", { volume_id: doomed });
    const rest = await csi.call<List>("Controller", "ListVolumes", { starting_token: first.next_token });
    assert.equal(rest.entries.length, total - 2);
  });

  it("answers ABORTED for a token it did not hand out, INVALID_ARGUMENT for negative max_entries", async () => {
    await rejectsWith(csi.call("Controller", "ListVolumes", { starting_token: "garbage" }), "ABORTED");
    await rejectsWith(csi.call("Controller", "ListVolumes", { starting_token: "after:%%%" }), "ABORTED");
    await rejectsWith(csi.call("Controller", "ListVolumes", { max_entries: -1 }), "INVALID_ARGUMENT");
  });
});
