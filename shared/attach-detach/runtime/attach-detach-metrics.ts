// kube-controller-manager's attach/detach metric that operators alert on:
// detaches that did not wait for the node to unmount, by reason.
import type { Counter } from "prom-client";
import { counter, processMetrics, type Registry } from "../../metrics.ts";

export interface AttachDetachMetrics {
  forcedDetaches: Counter<"reason">;
}

export function attachDetachMetrics(registry: Registry = processMetrics()): AttachDetachMetrics {
  return {
    forcedDetaches: counter(registry, {
      // Upstream's name: the subsystem attach_detach_controller before the counter's own name.
      name: "attach_detach_controller_attachdetach_controller_forced_detaches",
      help: "Number of times the A/D Controller performed a forced detach",
      labelNames: ["reason"],
    }),
  };
}
