// The pure parts of the real-server bench (bench/real/): its options, the
// figures it computes from watch counts and kube-apiserver's counters, and
// which objects it counts as its own. The bench itself needs a real
// kube-apiserver and is not run here.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  claimCosts,
  delta,
  medianFigures,
  ratios,
  realSummary,
  requestTotals,
} from "../../bench/real/figures.ts";
import { realParamsFromArgs, wantsRealServer } from "../../bench/real/options.ts";
import { BENCH_FUNCTIONS, oneProcessFunctions, withCpuProfile } from "../../bench/real/ours.ts";
import { flatFigures, isBenchObject } from "../../bench/real/workloads.ts";
import { CONTROLLERS_NODE_OPTIONS } from "../../functions/node-options.ts";
import {
  events,
  persistentVolumeClaims,
  persistentVolumes,
  volumeAttachments,
} from "../../shared/kube/resources.ts";
import type { KubeObject } from "../../shared/kube/types.ts";

test("a kubeconfig flag or KUBECONFIG switches the bench to a real server; nothing else does", () => {
  const table: [string[], Record<string, string>, boolean][] = [
    [[], {}, false],
    [["--claims", "5"], {}, false],
    [["--kubeconfig", "/k"], {}, true],
    [["--kubeconfig=/k"], {}, true],
    [[], { KUBECONFIG: "/k" }, true],
    [[], { KUBECONFIG: "" }, false],
  ];
  for (const [args, env, expected] of table)
    assert.equal(wantsRealServer(args, env), expected, `${args.join(" ")} ${JSON.stringify(env)}`);
});

test("options: the issue's workloads by default, flags over environment over the built binaries", () => {
  const p = realParamsFromArgs([], { KUBECONFIG: "~/kc", HOME: "/home/u" });
  assert.equal(p.kubeconfig, "/home/u/kc");
  assert.deepEqual(p.workloads, ["provision", "delete", "bind", "lateVolume", "attach"]);
  assert.equal(p.claims, 200);
  assert.deepEqual(p.bindSizes, [100, 1000]);
  assert.equal(p.lateRuns, 5);
  assert.equal(p.attachments, 100);
  assert.equal(p.compare, false);
  assert.equal(p.upstreamDefaults, false);
  assert.equal(p.resyncSeconds, 60);
  assert.equal(p.forwarderConcurrency, undefined);
  assert.equal(p.workers, undefined);
  assert.equal(p.oneProcess, false);
  assert.equal(p.cpuProfDir, undefined);
  assert.equal(p.warmup, 0, "cold processes unless asked");
  assert.equal(p.upstream.csiAttacher, "/home/u/.cache/kube-storage-functions/real-cluster/bin/csi-attacher");

  const q = realParamsFromArgs(
    [
      "--kubeconfig",
      "/flag",
      "--skip",
      "lateVolume,attach",
      "--bind-sizes",
      "7,70",
      "--compare",
      "--upstream-defaults",
      "--upstream-bin-dir",
      "/bins",
      "--csi-provisioner",
      "/p",
      "--forwarder-concurrency",
      "4",
      "--workers",
      "100",
      "--one-process",
      "--cpu-prof",
      "~/profiles",
      "--warmup",
      "50",
    ],
    { KUBECONFIG: "/env", CSI_ATTACHER: "/a", HOME: "/home/u" },
  );
  assert.equal(q.kubeconfig, "/flag");
  assert.deepEqual(q.workloads, ["provision", "delete", "bind"]);
  assert.deepEqual(q.bindSizes, [7, 70]);
  assert.equal(q.compare, true);
  assert.equal(q.upstreamDefaults, true);
  assert.equal(q.forwarderConcurrency, 4);
  assert.equal(q.workers, 100);
  assert.equal(q.oneProcess, true);
  assert.equal(q.cpuProfDir, "/home/u/profiles");
  assert.equal(q.warmup, 50);
  assert.deepEqual(q.upstream, {
    kubeControllerManager: "/bins/kube-controller-manager",
    csiProvisioner: "/p",
    csiAttacher: "/a",
    hostpathPlugin: "/bins/hostpathplugin",
  });
});

test("options: bad input is a usage error naming the option", () => {
  const env = { KUBECONFIG: "/k" };
  assert.throws(() => realParamsFromArgs([], {}), /--kubeconfig/);
  assert.throws(() => realParamsFromArgs(["--claims", "lots"], env), /--claims must be a whole number/);
  assert.throws(() => realParamsFromArgs(["--claims", "0"], env), /--claims must be between 1/);
  assert.throws(() => realParamsFromArgs(["--workloads", "provision,fly"], env), /unknown workload fly/);
  assert.throws(() => realParamsFromArgs(["--workloads", "delete"], env), /delete workload/);
  assert.throws(() => realParamsFromArgs(["--cpu-prof", ""], env), /--cpu-prof needs a folder/);
  assert.throws(() => realParamsFromArgs(["--warmup", "some"], env), /--warmup must be a whole number/);
  assert.throws(() => realParamsFromArgs(["--bogus"], env), /bogus/);
});

test("requestTotals sums kube-apiserver's request counter by verb and resource, leaving out non-resource URLs", () => {
  const text = [
    "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
    "# TYPE apiserver_request_total counter",
    'apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="resource",subresource="",verb="GET",version="v1"} 12',
    'apiserver_request_total{code="404",component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="resource",subresource="",verb="GET",version="v1"} 3',
    'apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="persistentvolumeclaims",scope="resource",subresource="status",verb="PUT",version="v1"} 5',
    'apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 40',
    'apiserver_request_duration_seconds_count{resource="persistentvolumes",verb="GET"} 99',
  ].join("\n");
  assert.deepEqual(requestTotals(text), {
    "GET persistentvolumes": 15,
    "PUT persistentvolumeclaims/status": 5,
  });
  assert.deepEqual(delta({ "GET a": 3, "LIST b": 1 }, { "GET a": 5, "LIST b": 1, "PUT c": 2 }), {
    "GET a": 2,
    "PUT c": 2,
  });
});

test("claimCosts: writes and Events per claim from the watch, the bench's own creates out, reads from the counters", () => {
  const changes = {
    "ADDED persistentvolumeclaims": 10,
    "MODIFIED persistentvolumeclaims": 30,
    "ADDED persistentvolumes": 10,
    "MODIFIED persistentvolumes": 20,
    "ADDED events": 15,
    "MODIFIED events": 5,
  };
  const requests = {
    "GET persistentvolumeclaims": 40,
    "LIST persistentvolumes": 2,
    "WATCH persistentvolumes": 9,
  };
  const costs = claimCosts(changes, 10, 10, requests);
  assert.deepEqual(costs.objectWritesPerClaim, { value: 6, target: "<= 4", met: false });
  assert.deepEqual(costs.eventsPerClaim, { value: 2, target: "<= 1", met: false });
  assert.equal(costs.apiReadsPerClaim, 4.2);
  assert.equal(costs.changesPerClaim["ADDED persistentvolumeclaims"], undefined);
  assert.equal(costs.changesPerClaim["MODIFIED persistentvolumeclaims"], 3);
  const lean = claimCosts(
    { "ADDED persistentvolumeclaims": 4, "ADDED persistentvolumes": 4, "ADDED events": 4 },
    4,
    4,
    undefined,
  );
  assert.equal(lean.objectWritesPerClaim.met, true);
  assert.equal(lean.eventsPerClaim.met, true);
  assert.equal(lean.apiReadsPerClaim, undefined);
});

test("figures of rounds: flattened, the median per figure, upstream over ours", () => {
  const round = (seconds: number) =>
    flatFigures({
      provision: {
        claims: 2,
        seconds,
        throughputPerSecond: 2 / seconds,
        costs: claimCosts({ "ADDED persistentvolumes": 2 }, 2, 0, { "GET persistentvolumes": 4 }),
      },
      bind: [
        { pairs: 100, seconds: seconds / 2 },
        { pairs: 1000, seconds: seconds * 3 },
      ],
      lateVolume: { runs: 1, medianSeconds: 0.5, runsSeconds: [0.5] },
    });
  assert.deepEqual(round(4), {
    "provision.seconds": 4,
    "provision.objectWritesPerClaim": 1,
    "provision.eventsPerClaim": 0,
    "provision.apiReadsPerClaim": 2,
    "bind.100.seconds": 2,
    "bind.1000.seconds": 12,
    "lateVolume.medianSeconds": 0.5,
  });
  const ours = medianFigures([round(4), round(2), round(9)]);
  assert.equal(ours["provision.seconds"], 4);
  assert.equal(ours["bind.1000.seconds"], 12);
  const r = ratios(ours, { "provision.seconds": 10, "provision.eventsPerClaim": 2, "attach.seconds": 1 });
  assert.deepEqual(r["provision.seconds"], { ours: 4, upstream: 10, upstreamOverOurs: 2.5 });
  assert.equal(r["provision.eventsPerClaim"]?.upstreamOverOurs, Number.POSITIVE_INFINITY);
  assert.equal(r["attach.seconds"], undefined);
});

test("the bench counts its own objects only: named ksf-bench-*, or bound to a claim of that name", () => {
  const o = (extra: Record<string, unknown>, name = "x"): KubeObject =>
    ({ metadata: { name }, ...extra }) as KubeObject;
  assert.equal(isBenchObject(persistentVolumeClaims, o({}, "ksf-bench-prov-1")), true);
  assert.equal(isBenchObject(persistentVolumeClaims, o({}, "data")), false);
  assert.equal(
    isBenchObject(persistentVolumes, o({ spec: { claimRef: { name: "ksf-bench-prov-1" } } }, "pvc-1")),
    true,
  );
  assert.equal(isBenchObject(persistentVolumes, o({ spec: { claimRef: { name: "data" } } }, "pvc-2")), false);
  assert.equal(
    isBenchObject(
      volumeAttachments,
      o({ spec: { source: { persistentVolumeName: "ksf-bench-att-1" } } }, "csi-1"),
    ),
    true,
  );
  assert.equal(
    isBenchObject(events, o({ involvedObject: { kind: "PersistentVolumeClaim", name: "ksf-bench-a" } })),
    true,
  );
  assert.equal(
    isBenchObject(events, o({ involvedObject: { kind: "PersistentVolume", name: "pvc-123" } })),
    true,
  );
  assert.equal(isBenchObject(events, o({ involvedObject: { kind: "Pod", name: "web-0" } })), false);
});

test("the summary judges the issue's targets: writes, Events and the late PV always, speed-ups only against upstream", () => {
  const ours = {
    "provision.seconds": 4,
    "provision.objectWritesPerClaim": 4,
    "provision.eventsPerClaim": 1.5,
    "lateVolume.medianSeconds": 1,
    "bind.1000.seconds": 10,
  };
  const alone = realSummary(ours);
  assert.deepEqual(
    alone.map((l) => [l.figure, l.target, l.met]),
    [
      ["provision.objectWritesPerClaim", "<= 4", true],
      ["provision.eventsPerClaim", "<= 1", false],
      ["lateVolume.medianSeconds", "< 1", false],
    ],
  );
  const withSmall = { ...ours, "bind.20.seconds": 1 };
  const compared = realSummary(
    withSmall,
    ratios(withSmall, { "provision.seconds": 8, "bind.1000.seconds": 19, "bind.20.seconds": 3 }),
  );
  assert.deepEqual(
    compared.slice(3).map((l) => [l.figure, l.value, l.met]),
    [
      ["provision.seconds (upstream / ours)", 2, true],
      ["bind.20.seconds (upstream / ours)", 3, true],
      ["bind.1000.seconds (upstream / ours)", 1.9, false],
    ],
  );
});

test("--one-process runs admission and one `controllers` process fed every kind the separate controllers take", () => {
  const [admission, host, ...rest] = oneProcessFunctions();
  assert.equal(rest.length, 0);
  assert.equal(admission?.name, "admission");
  assert.equal(host?.name, "controllers");
  const separate = BENCH_FUNCTIONS.filter((f) => f.kinds.length > 0);
  assert.equal(host?.env?.CONTROLLERS, separate.map((f) => f.name).join(","));
  // The heap settings the one-process deployment (deploy/components/one-process) gives it.
  assert.equal(host?.env?.NODE_OPTIONS, CONTROLLERS_NODE_OPTIONS);
  assert.deepEqual(new Set(host?.kinds), new Set(separate.flatMap((f) => f.kinds)));
});

test("--cpu-prof adds a V8 CPU profile per process to what NODE_OPTIONS already says", () => {
  assert.equal(withCpuProfile("--max-old-space-size=64", undefined, "admission"), "--max-old-space-size=64");
  assert.equal(
    withCpuProfile("--max-old-space-size=64", "/p", "admission"),
    "--max-old-space-size=64 --cpu-prof --cpu-prof-dir=/p/admission",
  );
  assert.equal(withCpuProfile(undefined, "/p", "forwarder"), "--cpu-prof --cpu-prof-dir=/p/forwarder");
});
