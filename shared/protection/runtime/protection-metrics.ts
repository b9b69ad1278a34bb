// Counters of the protection function. Upstream's protection controllers
// expose only their workqueues' metrics; these count what they do instead.
import type { Counter } from "prom-client";
import { counter, processMetrics, type Registry } from "../../metrics.ts";

export type ProtectedKind = "PersistentVolumeClaim" | "PersistentVolume";

export interface ProtectionMetrics {
  finalizersAdded: Counter<"kind">;
  finalizersRemoved: Counter<"kind">;
  /** Deletions held back because the object is still in use (a pod uses the claim, the PV is Bound). */
  keptInUse: Counter<"kind">;
  /** Live LISTs of a namespace's pods made before freeing a claim. */
  livePodLists: Counter;
}

export function protectionMetrics(registry: Registry = processMetrics()): ProtectionMetrics {
  return {
    finalizersAdded: counter(registry, {
      name: "protection_finalizers_added_total",
      help: "Protection finalizers added to objects that lacked them, by kind",
      labelNames: ["kind"],
    }),
    finalizersRemoved: counter(registry, {
      name: "protection_finalizers_removed_total",
      help: "Protection finalizers removed from objects being deleted that nothing uses, by kind",
      labelNames: ["kind"],
    }),
    keptInUse: counter(registry, {
      name: "protection_deletions_held_total",
      help: "Checks of an object being deleted that kept its protection finalizer because it is in use, by kind",
      labelNames: ["kind"],
    }),
    livePodLists: counter(registry, {
      name: "protection_live_pod_lists_total",
      help: "Live lists of a namespace's pods made before removing a claim's protection finalizer",
    }),
  };
}
