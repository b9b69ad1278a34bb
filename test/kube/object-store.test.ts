// ObjectStore: what a watched copy holds after events, relists and lists
// merged from elsewhere, and when it may claim to reflect a revision.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ObjectStore, type StoreChange } from "../../shared/kube/object-store.ts";
import type { KubeObject } from "../../shared/kube/types.ts";

function obj(name: string, rv: string, label = ""): KubeObject {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name, resourceVersion: rv, labels: { label } },
  };
}

type Step =
  | { apply: StoreChange; object: KubeObject }
  | { listed: string }
  | { replace: KubeObject[]; rv: string };

interface Case {
  name: string;
  steps: Step[];
  /** name@rv of what the store holds, sorted. */
  holds: string[];
  covers: Record<string, boolean>;
}

const cases: Case[] = [
  {
    name: "nothing promised before the first list",
    steps: [],
    holds: [],
    covers: { "1": false },
  },
  {
    name: "an initial list then watch events",
    steps: [
      { apply: "add", object: obj("a", "3", "old") },
      { apply: "add", object: obj("b", "4", "old") },
      { listed: "5" },
      { apply: "update", object: obj("a", "7", "new") },
      { apply: "add", object: obj("c", "8") },
      { apply: "delete", object: obj("b", "9") },
    ],
    holds: ["a@7", "c@8"],
    covers: { "5": true, "9": true, "10": false },
  },
  {
    name: "an older copy never replaces a newer one",
    steps: [
      { listed: "5" },
      { apply: "update", object: obj("a", "9") },
      { apply: "update", object: obj("a", "7") },
    ],
    holds: ["a@9"],
    covers: { "9": true },
  },
  {
    name: "a delete older than the stored copy keeps it (deleted and created again)",
    steps: [
      { listed: "5" },
      { apply: "add", object: obj("a", "9") },
      { apply: "delete", object: obj("a", "8") },
    ],
    holds: ["a@9"],
    covers: { "9": true },
  },
  {
    name: "a list merged from elsewhere: the watch's late events at or below it are ignored",
    steps: [
      { apply: "add", object: obj("a", "3") },
      { apply: "add", object: obj("gone", "4", "old") },
      { listed: "5" },
      // A fresh list at 20: a changed, "gone" deleted, "new" created before 20.
      { replace: [obj("a", "12", "new"), obj("new", "15")], rv: "20" },
      // The watch catches up late with the same history.
      { apply: "update", object: obj("a", "6") },
      { apply: "add", object: obj("late", "11") },
      { apply: "delete", object: obj("late", "13") },
      { apply: "add", object: obj("new", "15") },
      { apply: "update", object: obj("a", "21") },
    ],
    holds: ["a@21", "new@15"],
    covers: { "20": true, "21": true, "22": false },
  },
  {
    name: "a merged list keeps what the watch has shown to be newer than the list",
    steps: [
      { listed: "5" },
      { apply: "add", object: obj("fresh", "30") },
      { apply: "update", object: obj("a", "31") },
      { replace: [obj("a", "12")], rv: "20" },
    ],
    holds: ["a@31", "fresh@30"],
    covers: { "31": true, "32": false },
  },
  {
    name: "opaque resourceVersions: the latest arrival wins and nothing is promised",
    steps: [
      { apply: "add", object: obj("a", "x1") },
      { listed: "list-a" },
      { apply: "update", object: obj("a", "x0") },
    ],
    holds: ["a@x0"],
    covers: { "1": false, x0: false },
  },
];

describe("ObjectStore", () => {
  for (const c of cases) {
    it(c.name, () => {
      const byLabel = (o: KubeObject) => o.metadata.labels?.label ?? "";
      const store = new ObjectStore<KubeObject>({ indexBy: byLabel });
      for (const step of c.steps) {
        if ("apply" in step) store.apply(step.apply, step.object);
        else if ("listed" in step) store.listed(step.listed);
        else store.replaceWithList(step.replace, step.rv);
      }
      const holds = store
        .items()
        .map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`)
        .sort();
      assert.deepEqual(holds, c.holds);
      // The index holds exactly what the store holds, under each object's current key.
      const names = (list: readonly KubeObject[] | undefined) =>
        (list ?? []).map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`).sort();
      for (const label of new Set([...store.items().map(byLabel), "old", "new", ""]))
        assert.deepEqual(
          names(store.byIndex(label)),
          names(store.items().filter((o) => byLabel(o) === label)),
          `byIndex(${JSON.stringify(label)})`,
        );
      for (const [rv, expected] of Object.entries(c.covers))
        assert.equal(store.covers(rv), expected, `covers(${rv})`);
    });
  }

  it("whenCovers: true once an event reaches the revision, false after the timeout or for an opaque one", async () => {
    const store = new ObjectStore<KubeObject>();
    assert.equal(store.changedWithin(1000), false);
    store.listed("5");
    assert.equal(store.changedWithin(1000), true);
    assert.equal(await store.whenCovers("4", 10), true);
    const waiting = store.whenCovers("9", 5000);
    setTimeout(() => store.apply("add", obj("a", "9")), 5);
    assert.equal(await waiting, true);
    assert.equal(await store.whenCovers("20", 10), false);
    assert.equal(await store.whenCovers("opaque", 5000), false);
  });

  it("byIndex follows an object whose key changes, and is undefined without an index", () => {
    const store = new ObjectStore<KubeObject>({ indexBy: (o) => o.metadata.labels?.label ?? "" });
    store.apply("add", obj("a", "1", "old"));
    store.apply("add", obj("b", "2", "old"));
    store.apply("update", obj("a", "3", "new"));
    assert.deepEqual(
      store.byIndex("old")?.map((o) => o.metadata.name),
      ["b"],
    );
    assert.deepEqual(
      store.byIndex("new")?.map((o) => o.metadata.name),
      ["a"],
    );
    store.apply("delete", obj("b", "4", "old"));
    assert.deepEqual(store.byIndex("old"), []);
    store.replaceWithList([obj("c", "5", "new")], "5");
    assert.deepEqual(
      store.byIndex("new")?.map((o) => o.metadata.name),
      ["c"],
      "a is gone with the list",
    );
    assert.equal(new ObjectStore<KubeObject>().byIndex("new"), undefined);
  });

  it("items() is one array until the next change, then a new one", () => {
    const store = new ObjectStore<KubeObject>();
    store.apply("add", obj("a", "1"));
    const first = store.items();
    assert.equal(store.items(), first);
    store.apply("add", obj("b", "2"));
    assert.notEqual(store.items(), first);
    assert.equal(store.items().length, 2);
    assert.equal(store.get("", "b")?.metadata.resourceVersion, "2");
  });
});

describe("learn: the process's own writes", () => {
  const withUid = (name: string, rv: string, uid: string, label = ""): KubeObject => ({
    ...obj(name, rv, label),
    metadata: { ...obj(name, rv, label).metadata, uid },
  });

  it("a newer state of a held object is kept, without moving the revision mark", () => {
    const store = new ObjectStore<KubeObject>();
    store.apply("add", withUid("a", "5", "u1"));
    store.listed("5");
    store.learn(withUid("a", "9", "u1", "written"));
    assert.equal(store.get("", "a")?.metadata.resourceVersion, "9");
    assert.equal(store.covers("9"), false, "only the watch speaks for revisions");
    // The watch's own delivery of that write, then older news, change nothing.
    store.apply("update", withUid("a", "9", "u1", "written"));
    store.apply("update", withUid("a", "7", "u1", "stale"));
    assert.equal(store.get("", "a")?.metadata.labels?.label, "written");
  });

  it("never adds, never undoes a deletion, never replaces another object of that name or a newer state", () => {
    const store = new ObjectStore<KubeObject>();
    store.listed("1");
    store.learn(withUid("gone", "3", "u1"));
    assert.equal(store.get("", "gone"), undefined, "not held: not added");
    store.apply("add", withUid("b", "4", "u2"));
    store.learn(withUid("b", "6", "another"));
    assert.equal(store.get("", "b")?.metadata.uid, "u2", "another object by that name");
    store.learn(withUid("b", "3", "u2", "older"));
    assert.equal(store.get("", "b")?.metadata.resourceVersion, "4", "an older state");
    store.apply("delete", withUid("b", "8", "u2"));
    store.learn(withUid("b", "7", "u2"));
    assert.equal(store.get("", "b"), undefined, "the deletion stays");
  });
});

describe("wasDeleted: deletions the API server reported, remembered by UID", () => {
  const withUid = (name: string, rv: string, uid: string): KubeObject => ({
    ...obj(name, rv),
    metadata: { ...obj(name, rv).metadata, uid },
  });

  it("a DELETED event and a relist without the object prove it gone; adds and updates do not", () => {
    const store = new ObjectStore<KubeObject>({ rememberDeleted: 10 });
    store.replaceWithList(
      [withUid("a", "3", "uid-a"), withUid("b", "4", "uid-b"), withUid("c", "5", "uid-c")],
      "5",
    );
    store.apply("update", withUid("a", "6", "uid-a"));
    store.apply("delete", withUid("b", "7", "uid-b"));
    assert.equal(store.wasDeleted("uid-a"), false);
    assert.equal(store.wasDeleted("uid-b"), true);
    // A DELETED event for an object the copy never held is the API server's word all the same.
    store.apply("delete", withUid("x", "8", "uid-x"));
    assert.equal(store.wasDeleted("uid-x"), true);
    // A list at a newer revision without c: c was deleted in between.
    store.replaceWithList([withUid("a", "6", "uid-a")], "9");
    assert.equal(store.wasDeleted("uid-c"), true);
    assert.equal(store.wasDeleted("uid-a"), false);
    assert.equal(store.wasDeleted(undefined), false);
  });

  it("keeps the newest deletions only, and none unless asked", () => {
    const store = new ObjectStore<KubeObject>({ rememberDeleted: 2 });
    for (const n of ["1", "2", "3"]) store.apply("delete", withUid(`o${n}`, n, `uid-${n}`));
    assert.deepEqual(
      ["uid-1", "uid-2", "uid-3"].map((u) => store.wasDeleted(u)),
      [false, true, true],
    );
    const plain = new ObjectStore<KubeObject>();
    plain.apply("delete", withUid("o", "1", "uid-o"));
    assert.equal(plain.wasDeleted("uid-o"), false);
  });
});
