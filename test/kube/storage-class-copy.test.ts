// The watched copy of the StorageClasses, over the sandbox: reads come from it
// once it is synced, a class it does not have yet is read from the API, and
// before its first list every read goes to the API.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { ObjectStore } from "../../shared/kube/object-store.ts";
import { storageClasses } from "../../shared/kube/resources.ts";
import {
  listStorageClasses,
  readStorageClass,
  type StorageClassCopy,
  storageClassCopyFromEnv,
} from "../../shared/kube/storage-class-copy.ts";
import type { StorageClass } from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

function storageClass(name: string, parameters: Record<string, string> = {}): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name },
    provisioner: "example.csi.io",
    parameters,
    volumeBindingMode: "Immediate",
  };
}

describe("StorageClass copy, over the sandbox", () => {
  let sandbox: TestSandbox;
  let kube: KubeJsonClient;
  const copy = { current: undefined as ReturnType<typeof storageClassCopyFromEnv> };

  before(async () => {
    sandbox = await startTestSandbox();
    kube = new KubeJsonClient(sandbox.kubeConfig);
    await sandbox.admin.seed([storageClass("fast", { tier: "gold" }), storageClass("slow")]);
  });
  after(async () => {
    await copy.current?.stop();
    await kube.close();
    await sandbox.close();
  });

  const classReads = async (): Promise<number> => {
    const counters = await sandbox.admin.counters();
    return (counters["get storageclasses"] ?? 0) + (counters["list storageclasses"] ?? 0);
  };

  it("reads from the copy once it is synced, the same class the API gives", async () => {
    const options = {
      kubeConfig: sandbox.kubeConfig,
      json: kube,
      log: createLogger({ name: "test", level: "silent" }),
    };
    assert.equal(storageClassCopyFromEnv({ STORAGE_CLASS_CACHE: "false" }, options), undefined, "turned off");
    copy.current = storageClassCopyFromEnv({}, options);
    assert.ok(copy.current, "on by default");
    const started = copy.current.get();
    assert.equal(copy.current.get(), started, "started once");
    const deadline = Date.now() + 5000;
    while (!started.synced && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.ok(started.synced, "the first list is in");

    const fromApi = await readStorageClass(kube, "fast", undefined);
    const before = await classReads();
    const fromCopy = await readStorageClass(kube, "fast", started);
    assert.deepEqual(fromCopy, fromApi);
    assert.deepEqual((await listStorageClasses(kube, started)).map((c) => c.metadata.name).sort(), [
      "fast",
      "slow",
    ]);
    assert.equal(await classReads(), before, "neither read reached the API");
  });

  it("a class the copy does not have yet is read from the API; one that does not exist is undefined", async () => {
    const started = copy.current?.get();
    assert.ok(started);
    // Not in the copy (as if created a moment ago and not yet seen): the API has it.
    const hidden: StorageClassCopy = { synced: true, store: new ObjectStore<StorageClass>() };
    const before = await classReads();
    assert.equal((await readStorageClass(kube, "slow", hidden))?.metadata.name, "slow");
    assert.equal(await readStorageClass(kube, "missing", started), undefined);
    assert.equal(await classReads(), before + 2, "each miss asked the API");

    await kube.create(storageClasses, storageClass("new"));
    const deadline = Date.now() + 5000;
    while (!started.store.get("", "new") && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    assert.ok(started.store.get("", "new"), "the watch brings new classes into the copy");
  });

  it("before its first list the copy is not read: every read goes to the API", async () => {
    // A copy still making its first list may hold anything: here an out-of-date "fast".
    const store = new ObjectStore<StorageClass>();
    store.apply("add", {
      ...storageClass("fast", { tier: "stale" }),
      metadata: { name: "fast", resourceVersion: "1" },
    });
    const unsynced: StorageClassCopy = { synced: false, store };
    const before = await classReads();
    assert.equal((await readStorageClass(kube, "fast", unsynced))?.parameters?.tier, "gold");
    assert.deepEqual((await listStorageClasses(kube, unsynced)).map((c) => c.metadata.name).sort(), [
      "fast",
      "new",
      "slow",
    ]);
    assert.equal(await classReads(), before + 2);
  });
});
