// The sandbox kubelet's bookkeeping as tables: what it tears down and
// unstages, what node status reports in volumesInUse, and when a pod being
// deleted may go.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type NodeVolumeState,
  podMayGo,
  podsToTearDown,
  volumesInUse,
  volumesToUnstage,
} from "../../sandbox/kubelet/plan.ts";
import type { CsiVolumeToMount } from "../../sandbox/kubelet/pod-volumes.ts";
import type { Pod } from "../../shared/kube/types.ts";

function vol(handle: string, attachRequired = true): CsiVolumeToMount {
  return {
    uniqueName: `kubernetes.io/csi/d^${handle}`,
    pvName: `pv-${handle}`,
    driver: "d",
    volumeHandle: handle,
    attachRequired,
    block: false,
    capability: { mount: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } },
    readonly: false,
    volumeContext: {},
  };
}

const a = vol("a");
const b = vol("b");
const local = vol("l", false);

function state(staged: CsiVolumeToMount[], mounted: Record<string, CsiVolumeToMount[]>): NodeVolumeState {
  return {
    staged: new Map(staged.map((v) => [v.uniqueName, { volume: v }])),
    mounted: new Map(
      Object.entries(mounted).map(([uid, vs]) => [
        uid,
        new Map(vs.map((v) => [v.uniqueName, { volume: v }])),
      ]),
    ),
  };
}

function pod(uid: string, extra: { deleting?: boolean; phase?: string } = {}): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: uid, uid, ...(extra.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}) },
    spec: {},
    ...(extra.phase ? { status: { phase: extra.phase } } : {}),
  };
}

describe("podsToTearDown", () => {
  it("pods gone, being deleted or finished; not running ones", () => {
    const s = state([a], { running: [a], deleting: [a], finished: [a], gone: [a] });
    const pods = new Map([
      ["running", pod("running")],
      ["deleting", pod("deleting", { deleting: true })],
      ["finished", pod("finished", { phase: "Succeeded" })],
    ]);
    assert.deepEqual(podsToTearDown(s, pods), ["deleting", "finished", "gone"]);
  });
});

describe("volumesToUnstage", () => {
  const rows: { name: string; s: NodeVolumeState; wanted: string[]; want: string[] }[] = [
    { name: "staged, unused, unwanted", s: state([a], {}), wanted: [], want: [a.uniqueName] },
    { name: "still published for a pod", s: state([a], { p: [a] }), wanted: [], want: [] },
    { name: "wanted by a pod about to mount it", s: state([a], {}), wanted: [a.uniqueName], want: [] },
    { name: "only the unused of two", s: state([a, b], { p: [b] }), wanted: [], want: [a.uniqueName] },
  ];
  for (const row of rows) {
    it(row.name, () => assert.deepEqual(volumesToUnstage(row.s, new Set(row.wanted)), row.want));
  }
});

describe("volumesInUse", () => {
  it("attachable volumes wanted, staged or published, sorted and deduplicated", () => {
    assert.deepEqual(volumesInUse([b, a, local], state([a], { p: [a], q: [b] })), [
      a.uniqueName,
      b.uniqueName,
    ]);
  });
  it("empty when nothing attachable is left", () => {
    assert.deepEqual(volumesInUse([local], state([local], { p: [local] })), []);
  });
  it("a staged volume stays in use after its pods are gone, until unstaged", () => {
    assert.deepEqual(volumesInUse([], state([a], {})), [a.uniqueName]);
  });
});

describe("podMayGo", () => {
  const rows: {
    name: string;
    s: NodeVolumeState;
    had: string[];
    wanted: string[];
    inUse: string[];
    want: boolean;
  }[] = [
    {
      name: "still published",
      s: state([], { p: [a] }),
      had: [a.uniqueName],
      wanted: [],
      inUse: [],
      want: false,
    },
    {
      name: "its volume still staged",
      s: state([a], {}),
      had: [a.uniqueName],
      wanted: [],
      inUse: [],
      want: false,
    },
    {
      name: "its volume still reported in use",
      s: state([], {}),
      had: [a.uniqueName],
      wanted: [],
      inUse: [a.uniqueName],
      want: false,
    },
    {
      name: "another pod still wants the volume: no need to wait for it",
      s: state([a], { other: [a] }),
      had: [a.uniqueName],
      wanted: [a.uniqueName],
      inUse: [a.uniqueName],
      want: true,
    },
    { name: "all torn down", s: state([], {}), had: [a.uniqueName], wanted: [], inUse: [], want: true },
    { name: "never had volumes", s: state([b], {}), had: [], wanted: [], inUse: [b.uniqueName], want: true },
  ];
  for (const row of rows) {
    it(row.name, () =>
      assert.equal(podMayGo("p", row.s, new Set(row.had), new Set(row.wanted), row.inUse), row.want),
    );
  }
});
