// The user side of issue 18 in the chaos run: once a resizable claim is
// Bound, grow its request (1Gi → 2Gi, some again → 3Gi, some to a size the
// driver refuses, then back down above status.capacity as a user recovers)
// and change its VolumeAttributesClass (A → B; some through the infeasible C,
// then to B). Half the claims get a pod first, so some expansions happen
// while the volume is in use. Every plan always ends with its last patch:
// once the chaos ends, waits are cut short but the patches still go out, so
// the final spec is known whatever the timing was.
import { isValidQuantity, parseQuantityBytes } from "../../shared/kube/quantity.ts";
import type { PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { sleep } from "./options.ts";
import { attributeClasses, type HarnessClient } from "./workload.ts";

/** The driver's maximum volume size is 1 TiB (sandbox/csi/config.ts): this one is OUT_OF_RANGE. */
export const infeasibleSize = "2Ti";

type Growth = "once" | "twice" | "infeasible";
type Retier = "none" | "a-b" | "a-b-c-b" | "a-c-b";

const bytes = (q: string): number => (isValidQuantity(q) ? Number(parseQuantityBytes(q)) : 0);

export interface ResizePlan {
  claim: string;
  growth: Growth;
  retier: Retier;
  withPod: boolean;
}

export interface ResizeStats {
  /** Claims of the resizable class. */
  claims: number;
  /** Request raises patched (lowering after an infeasible one not counted). */
  expansionsRequested: number;
  /** Raises made while a pod the workload started for the claim was alive. */
  expansionsWithPod: number;
  /** Of the claims grown under a pod, those whose file system the kubelet grew while it ran (online). */
  grownOnline: number;
  infeasibleExpansions: number;
  /** Infeasible expansions the claim reported (ControllerResizeInfeasible) before the user lowered the request. */
  infeasibleExpansionsSeen: number;
  /** VolumeAttributesClass changes patched (rollbacks included). */
  modificationsRequested: number;
  infeasibleModifications: number;
  /** Infeasible modifications the claim reported (modifyVolumeStatus Infeasible) before the rollback. */
  infeasibleModificationsSeen: number;
  /** Claims whose plan never started: not Bound by the end of the chaos. */
  skipped: string[];
  /** Patches the API server refused (a finding: every patch here is one a user may make). */
  refusedPatches: string[];
}

/** Plans for the claims, so that even a handful covers every path. */
export function resizePlans(claims: readonly string[], random: () => number): ResizePlan[] {
  const growths: Growth[] = ["twice", "once", "infeasible"];
  const retiers: Retier[] = ["a-b", "none", "a-b-c-b", "a-c-b"];
  const order = [...claims].sort(() => random() - 0.5);
  return order.map((claim, i) => ({
    claim,
    growth: growths[i % growths.length]!,
    retier: retiers[i % retiers.length]!,
    withPod: i % 2 === 0,
  }));
}

export interface ResizeWorkloadOptions {
  harness: HarnessClient;
  random: () => number;
  /** The claim as last seen (the watchdog's copy), by name. */
  claim: (name: string) => PersistentVolumeClaim | undefined;
  /** Starts a pod on the claim; its name, or undefined when none was started. */
  startPod: (claimName: string) => Promise<string | undefined>;
  /** Lets the pod go (the pod churn deletes it). */
  endPod: (podName: string) => void;
  /** Longest wait for the system to show a state the user waits for. */
  stepTimeoutMs: number;
  say: (line: string) => void;
}

export class ResizeWorkload {
  private readonly o: ResizeWorkloadOptions;
  private stopping = false;
  readonly stats: ResizeStats = {
    claims: 0,
    expansionsRequested: 0,
    expansionsWithPod: 0,
    grownOnline: 0,
    infeasibleExpansions: 0,
    infeasibleExpansionsSeen: 0,
    modificationsRequested: 0,
    infeasibleModifications: 0,
    infeasibleModificationsSeen: 0,
    skipped: [],
    refusedPatches: [],
  };

  constructor(o: ResizeWorkloadOptions) {
    this.o = o;
  }

  /** Cuts every wait short; the remaining patches still go out. */
  stop(): void {
    this.stopping = true;
  }

  /** The plans the last run went through. */
  plans: readonly ResizePlan[] = [];

  private readonly podWaits: Promise<void>[] = [];

  /** Resolves once every plan's patches are out; pods may still wait for their file system (`pods()`). */
  async run(plans: readonly ResizePlan[]): Promise<void> {
    this.plans = plans;
    this.stats.claims = plans.length;
    await Promise.all(plans.map((p) => this.one(p)));
  }

  /** Resolves once every pod the workload started has been let go. */
  async pods(): Promise<void> {
    await Promise.all(this.podWaits);
  }

  /** Waits until the claim satisfies `check`, the chaos ends, or the step timeout; true when satisfied. */
  private async until(name: string, check: (c: PersistentVolumeClaim) => boolean): Promise<boolean> {
    const deadline = Date.now() + this.o.stepTimeoutMs;
    for (;;) {
      const c = this.o.claim(name);
      if (c && check(c)) return true;
      if (this.stopping || Date.now() >= deadline) return false;
      await sleep(100);
    }
  }

  private async pause(minMs: number, maxMs: number): Promise<void> {
    const until = Date.now() + minMs + this.o.random() * (maxMs - minMs);
    while (!this.stopping && Date.now() < until) await sleep(Math.min(100, until - Date.now()));
  }

  private async patch(name: string, spec: Record<string, unknown>): Promise<boolean> {
    try {
      await this.o.harness.patchClaimSpec(name, spec);
      return true;
    } catch (err) {
      if (this.stats.refusedPatches.length < 10)
        this.stats.refusedPatches.push(`${name} ${JSON.stringify(spec)}: ${String(err).slice(0, 300)}`);
      return false;
    }
  }

  private async one(plan: ResizePlan): Promise<void> {
    // Growing needs a Bound claim (the resize admission rule). A claim not Bound when the chaos ends gets
    // a little longer (faults are off by then); one that still is not is reported and left alone.
    let lateDeadline = 0;
    for (;;) {
      if (this.o.claim(plan.claim)?.status?.phase === "Bound") break;
      if (this.stopping) {
        lateDeadline ||= Date.now() + 10_000;
        if (Date.now() >= lateDeadline) {
          this.stats.skipped.push(plan.claim);
          return;
        }
      }
      await sleep(100);
    }
    await this.pause(0, 500);
    const pod = plan.withPod ? await this.o.startPod(plan.claim) : undefined;
    if (pod) await this.pause(200, 1000);
    await Promise.all([this.grow(plan, pod !== undefined), this.retier(plan)]);
    if (pod) this.podWaits.push(this.keepPod(plan.claim, pod));
  }

  /** The pod stays until the kubelet has grown the file system online (status.capacity reaches the request). */
  private async keepPod(claim: string, pod: string): Promise<void> {
    const online = await this.until(claim, (c) => {
      const want = c.spec.resources?.requests?.storage;
      const have = c.status?.capacity?.storage;
      return want !== undefined && have !== undefined && bytes(have) >= bytes(want);
    });
    if (online) this.stats.grownOnline++;
    this.o.endPod(pod);
  }

  private async raise(name: string, size: string, withPod: boolean): Promise<void> {
    if (!(await this.patch(name, { resources: { requests: { storage: size } } }))) return;
    this.stats.expansionsRequested++;
    if (withPod) this.stats.expansionsWithPod++;
  }

  private async grow(plan: ResizePlan, withPod: boolean): Promise<void> {
    const name = plan.claim;
    if (plan.growth === "infeasible") {
      await this.raise(name, infeasibleSize, withPod);
      this.stats.infeasibleExpansions++;
      const seen = await this.until(
        name,
        (c) => c.status?.allocatedResourceStatuses?.storage === "ControllerResizeInfeasible",
      );
      if (seen) this.stats.infeasibleExpansionsSeen++;
      // Back down, above status.capacity (1Gi: the infeasible size never got through), as a user recovers.
      await this.patch(name, { resources: { requests: { storage: "2Gi" } } });
      return;
    }
    await this.raise(name, "2Gi", withPod);
    if (plan.growth === "once") return;
    await this.pause(300, 1500);
    await this.raise(name, "3Gi", withPod);
  }

  private async retier(plan: ResizePlan): Promise<void> {
    const name = plan.claim;
    const { a, b, c } = attributeClasses;
    const to = async (vac: string): Promise<void> => {
      if (await this.patch(name, { volumeAttributesClassName: vac })) this.stats.modificationsRequested++;
    };
    const current = (vac: string) => (x: PersistentVolumeClaim) =>
      x.status?.currentVolumeAttributesClassName === vac;
    const throughC = async (): Promise<void> => {
      await to(c.name);
      this.stats.infeasibleModifications++;
      const seen = await this.until(name, (x) => x.status?.modifyVolumeStatus?.status === "Infeasible");
      if (seen) this.stats.infeasibleModificationsSeen++;
      await to(b.name);
    };
    await this.pause(0, 500);
    switch (plan.retier) {
      case "none":
        return;
      case "a-b":
        await to(b.name);
        return;
      case "a-b-c-b":
        await to(b.name);
        await this.until(name, current(b.name));
        await throughC();
        return;
      case "a-c-b":
        await this.until(name, current(a.name));
        await throughC();
        return;
    }
  }
}
