// The binder's upstream metrics: the pv_collector gauges as tables (objects
// in, label sets and counts out), which plan steps the operation metrics
// follow (real decisions on upstream-shaped objects), what is counted when a
// step runs or throws, and the whole controller over the sandbox API server.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import type { PlanStep } from "../../shared/binder/plan.ts";
import { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import {
  BinderInstruments,
  type BinderMetrics,
  binderMetrics,
  countInventory,
  type DecidedOn,
  meaningOfSteps,
  recordInventory,
  volumePluginName,
} from "../../shared/binder/runtime/binder-metrics.ts";
import { syncClaim } from "../../shared/binder/sync-claim.ts";
import { syncVolume } from "../../shared/binder/sync-volume.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims, persistentVolumes, storageClasses } from "../../shared/kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { createMetricsRegistry, type Registry } from "../../shared/metrics.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import {
  annBindCompleted,
  annBoundByController,
  annDynamicallyProvisioned,
  annStorageProvisioner,
  claimPhase,
  classExternal,
  defaultClasses,
  mockProvisioner,
  newClaim,
  newVolume,
  now,
  storageClass,
  volumePhase,
  withAnnotation,
  withoutCsi,
  withReclaimPolicy,
  withVolumeAttributesClass,
  withVolumeMode,
} from "./framework.ts";

function fresh(): { registry: Registry; metrics: BinderMetrics } {
  const registry = createMetricsRegistry({ defaultMetrics: false });
  return { registry, metrics: binderMetrics(registry) };
}

/** A histogram's series name (`_bucket`, `_sum`, `_count`); undefined for gauges and counters. */
function metricNameOf(v: object): string | undefined {
  const name = (v as { metricName?: unknown }).metricName;
  return typeof name === "string" ? name : undefined;
}

/** The one `_sum` series of a histogram: its labels and value. */
async function histogramSum(registry: Registry, name: string) {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values.find((v) => metricNameOf(v) === `${name}_sum`);
}

/** Every sample of one metric as "label=value,...: value", sorted, for exact comparison. */
async function samples(registry: Registry, name: string): Promise<string[]> {
  const metric = registry.getSingleMetric(name);
  assert.ok(metric, `${name} is registered`);
  const { values } = await metric.get();
  return values
    .filter((v) => {
      const series = metricNameOf(v);
      return series === undefined || series === `${name}_count`;
    })
    .map((v) => {
      const labels = Object.entries(v.labels)
        .filter(([k]) => k !== "le")
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, l]) => `${k}=${l}`)
        .join(",");
      return `${labels}: ${v.value}`;
    })
    .sort();
}

describe("pv_collector gauges", () => {
  const cases: {
    name: string;
    claims: PersistentVolumeClaim[];
    volumes: PersistentVolume[];
    expected: Record<string, string[]>;
  }[] = [
    {
      name: "nothing: no samples",
      claims: [],
      volumes: [],
      expected: {
        pv_collector_bound_pv_count: [],
        pv_collector_unbound_pv_count: [],
        pv_collector_bound_pvc_count: [],
        pv_collector_unbound_pvc_count: [],
        pv_collector_total_pv_count: [],
      },
    },
    {
      name: "volumes: Bound counts as bound, every other phase (Available, Released, Failed) as unbound",
      claims: [],
      volumes: [
        newVolume("v1", "1Gi", "uid1", "c1", volumePhase.bound, "Delete", "gold"),
        newVolume("v2", "1Gi", "uid2", "c2", volumePhase.bound, "Delete", "gold"),
        newVolume("v3", "1Gi", "", "", volumePhase.available, "Retain", "gold"),
        newVolume("v4", "1Gi", "uid4", "c4", volumePhase.released, "Retain", ""),
        newVolume("v5", "1Gi", "uid5", "c5", volumePhase.failed, "Delete", ""),
        withVolumeMode("Block", newVolume("v6", "1Gi", "", "", volumePhase.pending, "Retain", "")),
        withoutCsi(newVolume("v7", "1Gi", "", "", volumePhase.available, "Retain", "")),
      ],
      expected: {
        pv_collector_bound_pv_count: ["storage_class=gold: 2"],
        pv_collector_unbound_pv_count: ["storage_class=: 4", "storage_class=gold: 1"],
        pv_collector_total_pv_count: [
          "plugin_name=kubernetes.io/csi:hostpath.csi.k8s.io,volume_mode=Block: 1",
          "plugin_name=kubernetes.io/csi:hostpath.csi.k8s.io,volume_mode=Filesystem: 5",
          "plugin_name=kubernetes.io/host-path,volume_mode=Filesystem: 1",
        ],
        pv_collector_bound_pvc_count: [],
        pv_collector_unbound_pvc_count: [],
      },
    },
    {
      name: "claims: by namespace, class and volume attributes class; unset fields are empty labels",
      claims: [
        newClaim("c1", "uid1", "1Gi", "v1", claimPhase.bound, "gold"),
        withVolumeAttributesClass("fast", newClaim("c2", "uid2", "1Gi", "v2", claimPhase.bound, "gold")),
        newClaim("c3", "uid3", "1Gi", "", claimPhase.pending, undefined),
        newClaim("c4", "uid4", "1Gi", "", claimPhase.lost, "gold"),
        { ...newClaim("c5", "uid5", "1Gi", "", claimPhase.pending, "gold"), status: {} },
      ],
      volumes: [],
      expected: {
        pv_collector_bound_pvc_count: [
          "namespace=default,storage_class=gold,volume_attributes_class=: 1",
          "namespace=default,storage_class=gold,volume_attributes_class=fast: 1",
        ],
        pv_collector_unbound_pvc_count: [
          "namespace=default,storage_class=,volume_attributes_class=: 1",
          "namespace=default,storage_class=gold,volume_attributes_class=: 2",
        ],
        pv_collector_bound_pv_count: [],
        pv_collector_unbound_pv_count: [],
        pv_collector_total_pv_count: [],
      },
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const { registry, metrics } = fresh();
      recordInventory(metrics, countInventory(c.claims, c.volumes));
      for (const [name, want] of Object.entries(c.expected))
        assert.deepEqual(await samples(registry, name), want, name);
    });
  }

  it("a later pass replaces the label sets: a class with nothing left drops out", async () => {
    const { registry, metrics } = fresh();
    recordInventory(
      metrics,
      countInventory([], [newVolume("v1", "1Gi", "uid1", "c1", volumePhase.bound, "Delete", "gold")]),
    );
    recordInventory(
      metrics,
      countInventory([], [newVolume("v2", "1Gi", "uid2", "c2", volumePhase.bound, "Delete", "silver")]),
    );
    assert.deepEqual(await samples(registry, "pv_collector_bound_pv_count"), ["storage_class=silver: 1"]);
  });

  it("plugin names: CSI as kubernetes.io/csi:<driver>, in-tree hostPath, N/A otherwise", () => {
    const csi = newVolume("v", "1Gi", "", "", volumePhase.available, "Retain", "");
    const none = withoutCsi(csi);
    delete none.spec.hostPath;
    assert.equal(volumePluginName(csi), "kubernetes.io/csi:hostpath.csi.k8s.io");
    assert.equal(volumePluginName(withoutCsi(csi)), "kubernetes.io/host-path");
    assert.equal(volumePluginName(none), "N/A");
  });
});

describe("which plan steps the operation metrics follow", () => {
  const gold = storageClass("gold", mockProvisioner, { isDefault: true });
  const provisioned = withAnnotation(
    annBoundByController,
    "yes",
    newVolume(
      "pvc-uid1",
      "1Gi",
      "uid1",
      "claim1",
      volumePhase.available,
      "Delete",
      classExternal,
      annDynamicallyProvisioned,
    ),
  );
  const cases: { name: string; on: DecidedOn; plan: () => PlanStep[]; expected: string[] }[] = [
    {
      name: "a claim without class gets the default class: retroactive",
      on: {
        kind: "claim",
        claim: newClaim("claim1", "uid1", "1Gi", "", claimPhase.pending, undefined),
        volumes: [],
        classes: defaultClasses,
      },
      plan: () =>
        syncClaim(newClaim("claim1", "uid1", "1Gi", "", claimPhase.pending, undefined), {
          volumes: [],
          classes: [gold],
          pods: [],
          now,
        }).steps,
      expected: ["update-claim: retroactive"],
    },
    {
      name: "a claim with a class is handed to its provisioner: provision-handoff",
      on: {
        kind: "claim",
        claim: newClaim("claim1", "uid1", "1Gi", "", claimPhase.pending, classExternal),
        volumes: [],
        classes: defaultClasses,
      },
      plan: () =>
        syncClaim(newClaim("claim1", "uid1", "1Gi", "", claimPhase.pending, classExternal), {
          volumes: [],
          classes: defaultClasses,
          pods: [],
          now,
        }).steps,
      expected: [`update-claim: provision-handoff ${mockProvisioner}`],
    },
    {
      name: "a claim bound to the volume provisioned for it: provisioned-bound on the Bound status write",
      on: {
        kind: "claim",
        claim: newClaim(
          "claim1",
          "uid1",
          "1Gi",
          "",
          claimPhase.pending,
          classExternal,
          annStorageProvisioner,
        ),
        volumes: [provisioned],
        classes: defaultClasses,
      },
      plan: () =>
        syncClaim(
          newClaim("claim1", "uid1", "1Gi", "", claimPhase.pending, classExternal, annStorageProvisioner),
          {
            volumes: [provisioned],
            classes: defaultClasses,
            pods: [],
            now,
          },
        ).steps,
      expected: [`update-claim-status: provisioned-bound ${mockProvisioner}`],
    },
    {
      name: "a claim bound to a static volume: nothing",
      on: {
        kind: "claim",
        claim: newClaim("claim1", "uid1", "1Gi", "", claimPhase.pending, classExternal),
        volumes: [newVolume("static", "1Gi", "", "", volumePhase.available, "Retain", classExternal)],
        classes: defaultClasses,
      },
      plan: () =>
        syncClaim(newClaim("claim1", "uid1", "1Gi", "", claimPhase.pending, classExternal), {
          volumes: [newVolume("static", "1Gi", "", "", volumePhase.available, "Retain", classExternal)],
          classes: defaultClasses,
          pods: [],
          now,
        }).steps,
      expected: [],
    },
    {
      name: "an already Bound claim whose status is repaired: nothing (the provision ended earlier)",
      on: {
        kind: "claim",
        claim: newClaim(
          "claim1",
          "uid1",
          "1Gi",
          "pvc-uid1",
          claimPhase.bound,
          classExternal,
          annBindCompleted,
        ),
        volumes: [provisioned],
        classes: defaultClasses,
      },
      plan: () => [
        {
          op: "update-claim-status",
          claim: newClaim(
            "claim1",
            "uid1",
            "1Gi",
            "pvc-uid1",
            claimPhase.bound,
            classExternal,
            annBindCompleted,
          ),
        },
      ],
      expected: [],
    },
    {
      name: "a released volume with no deleter goes Failed: delete-failed on its Event",
      on: {
        kind: "volume",
        volume: withoutCsi(newVolume("v1", "1Gi", "uid-gone", "gone", volumePhase.released, "Delete", "")),
      },
      plan: () =>
        syncVolume(
          withoutCsi(newVolume("v1", "1Gi", "uid-gone", "gone", volumePhase.released, "Delete", "")),
          {
            claim: undefined,
            pods: [],
            now,
          },
        ).steps,
      expected: ["event: delete-failed"],
    },
    {
      name: "a released CSI volume waits for its external deleter: nothing",
      on: {
        kind: "volume",
        volume: newVolume("v1", "1Gi", "uid-gone", "gone", volumePhase.released, "Delete", ""),
      },
      plan: () =>
        syncVolume(newVolume("v1", "1Gi", "uid-gone", "gone", volumePhase.released, "Delete", ""), {
          claim: undefined,
          pods: [],
          now,
        }).steps,
      expected: [],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const meanings = meaningOfSteps(c.on, c.plan());
      const got = [...meanings].map(([step, m]) => {
        const detail = "plugin" in m ? ` ${m.plugin}` : "";
        return `${step.op}: ${m.kind}${detail}`;
      });
      assert.deepEqual(got, c.expected);
    });
  }
});

describe("counting steps when they run", () => {
  const at = new Date("2026-01-01T00:01:40Z");
  const claim = newClaim("claim1", "uid1", "1Gi", "", claimPhase.pending, undefined);
  const gold = storageClass("gold", mockProvisioner, { isDefault: true });

  /** Executors that answer every write, or throw on every write; events always succeed. */
  function executors(fail: boolean) {
    const write = async () => {
      if (fail) throw new Error("the API server said no");
      return 1;
    };
    return {
      "update-volume": write,
      "update-volume-status": write,
      "update-claim": write,
      "update-claim-status": write,
      event: async () => 0,
    };
  }

  it("a retroactive assignment that succeeds counts in the total only; one that fails in both", async () => {
    const { registry, metrics } = fresh();
    const instruments = new BinderInstruments(metrics, () => at);
    for (const fail of [false, true]) {
      const plan = instruments.decided(
        { kind: "claim", claim, volumes: [], classes: defaultClasses },
        syncClaim(claim, { volumes: [], classes: [gold], pods: [], now }),
      );
      const run = instruments.executors(executors(fail));
      const step = plan.steps[0];
      assert.equal(step?.op, "update-claim");
      const attempt = run["update-claim"](
        step as Extract<PlanStep, { op: "update-claim" }>,
        undefined as never,
      );
      if (fail) await assert.rejects(attempt, /said no/);
      else await attempt;
    }
    assert.deepEqual(await samples(registry, "retroactive_storageclass_total"), [": 2"]);
    assert.deepEqual(await samples(registry, "retroactive_storageclass_errors_total"), [": 1"]);
  });

  it("a failed hand-off to the provisioner is a provision error under the provisioner's name", async () => {
    const { registry, metrics } = fresh();
    const instruments = new BinderInstruments(metrics, () => at);
    const withClass = newClaim("claim1", "uid1", "1Gi", "", claimPhase.pending, classExternal);
    const plan = instruments.decided(
      { kind: "claim", claim: withClass, volumes: [], classes: defaultClasses },
      syncClaim(withClass, { volumes: [], classes: defaultClasses, pods: [], now }),
    );
    const step = plan.steps.find((s) => s.op === "update-claim") as Extract<PlanStep, { op: "update-claim" }>;
    await assert.rejects(instruments.executors(executors(true))["update-claim"](step, undefined as never));
    assert.deepEqual(await samples(registry, "volume_operation_errors_total"), [
      `operation_name=provision,plugin_name=${mockProvisioner}: 1`,
    ]);
  });

  it("the binding of a provisioned volume observes the time since the claim was created", async () => {
    const { registry, metrics } = fresh();
    const instruments = new BinderInstruments(metrics, () => at);
    const created = {
      ...newClaim("claim1", "uid1", "1Gi", "", claimPhase.pending, classExternal, annStorageProvisioner),
    };
    created.metadata.creationTimestamp = "2026-01-01T00:00:00Z";
    const volume = withAnnotation(
      annBoundByController,
      "yes",
      newVolume(
        "pvc-uid1",
        "1Gi",
        "uid1",
        "claim1",
        volumePhase.available,
        "Delete",
        classExternal,
        annDynamicallyProvisioned,
      ),
    );
    const plan = instruments.decided(
      { kind: "claim", claim: created, volumes: [volume], classes: defaultClasses },
      syncClaim(created, { volumes: [volume], classes: defaultClasses, pods: [], now }),
    );
    const run = instruments.executors(executors(false));
    for (const step of plan.steps)
      await (run[step.op] as (s: PlanStep, r: never) => Promise<unknown>)(step, undefined as never);
    const sum = await histogramSum(registry, "volume_operation_total_seconds");
    assert.deepEqual(sum?.labels, { plugin_name: mockProvisioner, operation_name: "provision" });
    assert.equal(sum?.value, 100);
  });

  it("a deleted Released Delete volume observes the time since its release, once per uid", async () => {
    const { registry, metrics } = fresh();
    const instruments = new BinderInstruments(metrics, () => at);
    const released = newVolume("v1", "1Gi", "uid1", "c1", volumePhase.released, "Delete", "gold");
    released.metadata.uid = "pv-uid-1";
    released.status = { phase: volumePhase.released, lastPhaseTransitionTime: "2026-01-01T00:01:30Z" };
    const classes = async (name: string) => (name === "gold" ? mockProvisioner : undefined);
    await instruments.volumeGone(released, classes);
    await instruments.volumeGone(released, classes);
    // Retained, or never released: no delete operation ended.
    await instruments.volumeGone(
      withReclaimPolicy("Retain", { ...released, metadata: { name: "v2", uid: "u2" } }),
      classes,
    );
    await instruments.volumeGone(
      { ...released, metadata: { name: "v3", uid: "u3" }, status: { phase: "Bound" } },
      classes,
    );
    // A class that is gone: N/A, as upstream.
    await instruments.volumeGone(
      {
        ...released,
        metadata: { name: "v4", uid: "u4" },
        spec: { ...released.spec, storageClassName: "gone" },
      },
      classes,
    );
    assert.deepEqual(await samples(registry, "volume_operation_total_seconds"), [
      "operation_name=delete,plugin_name=N/A: 1",
      `operation_name=delete,plugin_name=${mockProvisioner}: 1`,
    ]);
  });
});

describe("a DELETE event's copy is untrusted", () => {
  it("malformed copies are not timed, odd class names are not looked up, nothing throws", async () => {
    const { registry, metrics } = fresh();
    const instruments = new BinderInstruments(metrics, () => new Date("2026-01-01T00:01:40Z"));
    const looked: string[] = [];
    const provisionerOf = async (name: string) => {
      looked.push(name);
      throw new Error("no such class");
    };
    const base = newVolume("v1", "1Gi", "uid1", "c1", volumePhase.released, "Delete", "../x");
    base.status = { phase: volumePhase.released, lastPhaseTransitionTime: "2026-01-01T00:00:00Z" };
    const malformed = [
      {
        ...base,
        metadata: { name: "a", uid: "a" },
        status: { phase: "Released", lastPhaseTransitionTime: 12 },
      },
      { ...base, metadata: { name: "b", uid: "b" }, status: "Released" },
      { ...base, metadata: { name: "c", uid: "c" }, spec: null },
      {
        ...base,
        metadata: { name: "d", uid: "d" },
        status: { phase: "Released", lastPhaseTransitionTime: "2027-01-01T00:00:00Z" },
      },
    ] as unknown as PersistentVolume[];
    for (const copy of malformed) await instruments.volumeGone(copy, provisionerOf);
    await instruments.volumeGone(base, provisionerOf);
    assert.deepEqual(looked, [], "a class name that is not a DNS subdomain is never looked up");
    assert.deepEqual(await samples(registry, "volume_operation_total_seconds"), [
      "operation_name=delete,plugin_name=N/A: 1",
    ]);
  });
});

describe("binder controller metrics over the sandbox", () => {
  let sandbox: TestSandbox;
  let kube: KubeJsonClient;
  let registry: Registry;
  let binder: BinderController;

  before(async () => {
    sandbox = await startTestSandbox();
    kube = new KubeJsonClient(sandbox.kubeConfig);
  });
  after(async () => {
    await kube.close();
    await sandbox.close();
  });
  beforeEach(async () => {
    await sandbox.admin.reset();
    registry = createMetricsRegistry({ defaultMetrics: false });
    const events = new EventRecorder(kube, {
      component: "persistentvolume-controller",
      logger: { warn: () => undefined },
    });
    binder = new BinderController({ kube, events, metrics: binderMetrics(registry) });
  });

  it("assigns the default class retroactively, binds a provisioned volume, and the resync sets the gauges", async () => {
    await kube.create(storageClasses, storageClass("gold", mockProvisioner, { isDefault: true }));
    const claim = await kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
      ...newClaim("claim1", "", "1Gi", "", "", undefined),
      metadata: { name: "claim1", namespace: "default" },
      status: {},
    });
    await binder.syncClaimByKey("default", "claim1");
    assert.deepEqual(await samples(registry, "retroactive_storageclass_total"), [": 1"]);
    assert.deepEqual(await samples(registry, "retroactive_storageclass_errors_total"), [": 0"]);

    // What the external-provisioner does next: a PV pre-bound to the claim.
    const pv = newVolume(
      "pvc-1",
      "1Gi",
      claim.metadata.uid ?? "",
      "claim1",
      "",
      "Delete",
      "gold",
      annDynamicallyProvisioned,
    );
    delete pv.metadata.resourceVersion;
    await kube.create(persistentVolumes, pv);
    await binder.syncClaimByKey("default", "claim1");
    const bound = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "claim1", "default");
    assert.equal(bound.status?.phase, "Bound");
    assert.deepEqual(await samples(registry, "volume_operation_total_seconds"), [
      `operation_name=provision,plugin_name=${mockProvisioner}: 1`,
    ]);

    await binder.resync();
    assert.deepEqual(await samples(registry, "pv_collector_bound_pvc_count"), [
      "namespace=default,storage_class=gold,volume_attributes_class=: 1",
    ]);
    assert.deepEqual(await samples(registry, "pv_collector_bound_pv_count"), ["storage_class=gold: 1"]);
    assert.deepEqual(await samples(registry, "pv_collector_total_pv_count"), [
      "plugin_name=kubernetes.io/csi:hostpath.csi.k8s.io,volume_mode=Filesystem: 1",
    ]);
  });

  it("times a deletion when the released volume's DELETE event arrives", async () => {
    await kube.create(storageClasses, storageClass("gold", mockProvisioner));
    const released = newVolume(
      "pvc-2",
      "1Gi",
      "uid-gone",
      "gone",
      "",
      "Delete",
      "gold",
      annDynamicallyProvisioned,
    );
    delete released.metadata.resourceVersion;
    released.metadata.uid = "pv-uid-2";
    released.status = {
      phase: "Released",
      lastPhaseTransitionTime: new Date(Date.now() - 5000).toISOString(),
    };
    const object = JSON.parse(JSON.stringify(released)) as Record<string, unknown>;
    await binder.handleEvent({
      action: "delete",
      kind: "PersistentVolume",
      apiVersion: "v1",
      name: "pvc-2",
      object,
    });
    const sum = await histogramSum(registry, "volume_operation_total_seconds");
    assert.deepEqual(sum?.labels, { plugin_name: mockProvisioner, operation_name: "delete" });
    assert.ok((sum?.value ?? 0) >= 4 && (sum?.value ?? 0) < 60, `about 5 s, got ${sum?.value}`);
  });
});
