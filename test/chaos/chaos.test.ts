// The reduced chaos run inside `npm test`: the same harness as `npm run
// chaos` (bench/chaos/), sized for 2 cores and well under a minute: 24
// claims (12 static, 12 dynamic) plus 4 created-and-deleted ones, 2 function
// processes per controller behind the duplicating, shuffling dispatcher, the
// issue's fault rates (API 10 % 409, 5 % 500/503; CSI 10 % UNAVAILABLE /
// DEADLINE_EXCEEDED), a SIGKILL every ~2 s, up to 6 pods, placed by the sandbox scheduler and run by its kubelets on two nodes. Every
// invariant must be 0, every claim Bound, the system quiet after resync.
// The same run again with each instance hosting every controller in one
// process (FUNCTION=controllers). Issue 18: the resizer runs in the fleet too, and half the dynamic claims
// (6) are grown (once, twice, or past the driver's maximum and back down) and
// re-tiered (A → B, or through the infeasible class C back to B), some with a
// pod on them: no resize or modification lost, no size ever down.
import assert from "node:assert/strict";
import { it } from "node:test";
import { checked, defaultChaosOptions } from "../../bench/chaos/options.ts";
import { runChaos } from "../../bench/chaos/run.ts";

/** The reduced run's parameters; `oneProcess` hosts the fleet's controllers in one process per instance. */
function reduced(seed: number, oneProcess: boolean) {
  return checked({
    ...defaultChaosOptions,
    oneProcess,
    claims: 24,
    churnClaims: 4,
    instances: 2,
    chaosSeconds: 12,
    maxChaosSeconds: 40,
    killIntervalMs: 2000,
    maxPods: 6,
    podIntervalMs: 300,
    // Long enough for a pod to go Running through scheduler, attach and kubelet while faults fly.
    podMinLifetimeMs: 4000,
    podMaxLifetimeMs: 9000,
    settleMaxPasses: 20,
    settleMaxSeconds: 60,
    seed,
    createConcurrency: 8,
    resizableFraction: 0.5,
    resizeStepTimeoutMs: 6000,
    verbose: false,
  });
}

for (const oneProcess of [false, true])
  it(`chaos (reduced${oneProcess ? ", controllers in one process" : ""}): every claim Bound, every invariant 0, quiet after resync`, {
    timeout: 150_000,
  }, async (t) => {
    const seed = Number(process.env.CHAOS_SEED ?? "") || Math.floor(Math.random() * 2 ** 31) + 1;
    const report = await runChaos(reduced(seed, oneProcess));
    // The whole report on failure: parameters (seed), examples with timelines, error logs.
    const context = JSON.stringify(report, null, 1);
    t.diagnostic(`pods ${JSON.stringify(report.pods)}`);
    t.diagnostic(`seconds ${JSON.stringify(report.durationSeconds)}, settle passes ${report.settle.passes}`);
    for (const [name, count] of Object.entries(report.invariants))
      assert.equal(count, 0, `${name}: ${context}`);
    assert.equal(report.claims.boundAtEnd, 24, context);
    assert.equal(report.settle.quiet, true, context);
    assert.deepEqual(report.kills.unexpectedExits, [], context);
    // The chaos really happened: kills, duplicates, and faults on both sides.
    assert.ok(report.kills.killed >= 1, context);
    assert.ok(report.events.duplicated >= 1, context);
    assert.ok(Object.values(report.injectedFaults.api).reduce((a, b) => a + b, 0) >= 1, context);
    assert.ok(report.pods.created >= 1, context);
    // Pods go Running and away through the sandbox scheduler and kubelets: during the chaos as many
    // as its faults allow (reported, not required: a loaded machine may run none), and one after it.
    assert.ok(report.pods.ranAfterChaos && report.pods.goneAfterChaos, context);
    // Issue 18: every resizable claim was grown and ended at its request; the infeasible ones recovered.
    const r = report.resizes;
    t.diagnostic(`resizes ${JSON.stringify(r)}`);
    assert.equal(r.claims, 6, context);
    assert.deepEqual(r.refusedPatches, [], context);
    assert.ok(r.expansionsRequested >= r.claims - r.skipped.length, context);
    assert.equal(r.claimsExpanded, r.claims - r.skipped.length, context);
    assert.ok(r.infeasibleExpansions >= 1 && r.infeasibleModifications >= 1, context);
    assert.equal(r.infeasibleExpansionsRecovered, r.infeasibleExpansions, context);
    assert.equal(r.infeasibleModificationsRecovered, r.infeasibleModifications, context);
    assert.ok(r.claimsModified >= 1 && r.modificationsRequested >= 1, context);
    assert.ok(
      (r.csiCalls.ControllerExpandVolume ?? 0) >= 1 && (r.csiCalls.ControllerModifyVolume ?? 0) >= 1,
      context,
    );
    assert.equal(report.ok, true, context);
  });
