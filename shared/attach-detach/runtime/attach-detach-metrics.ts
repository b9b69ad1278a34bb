// kube-controller-manager's attach/detach metrics that operators alert on,
// with upstream's names and labels:
//   attach_detach_controller_attachdetach_controller_forced_detaches{reason}
//   attachdetach_controller_total_volumes{plugin_name,state}
// Upstream's total_volumes counts its desired and actual state of the world
// at each scrape. We keep no such caches: each node's reconcile counts what
// it read (load-node.ts), and the gauge sums the last count of every node
// this process reconciled; a resync visits every node.
import type { Counter, Gauge } from "prom-client";
import { annControllerManagedAttachDetach } from "../../kube/well-known.ts";
import { counter, gauge, processMetrics, type Registry } from "../../metrics.ts";
import { desiredVolumes, type NodeReconcileInput } from "../reconcile-node.ts";

export interface AttachDetachMetrics {
  forcedDetaches: Counter<"reason">;
  totalVolumes: Gauge<"plugin_name" | "state">;
}

export function attachDetachMetrics(registry: Registry = processMetrics()): AttachDetachMetrics {
  return {
    forcedDetaches: counter(registry, {
      // Upstream's name since 1.28: the subsystem attach_detach_controller before the counter's own name.
      name: "attach_detach_controller_attachdetach_controller_forced_detaches",
      help: "Number of times the A/D Controller performed a forced detach",
      labelNames: ["reason"],
    }),
    totalVolumes: gauge(registry, {
      name: "attachdetach_controller_total_volumes",
      help: "Number of volumes in A/D Controller",
      labelNames: ["plugin_name", "state"],
    }),
  };
}

/** The `state` label values, upstream's names of its two caches. */
export const worldState = {
  desired: "desired_state_of_world",
  actual: "actual_state_of_world",
} as const;

type WorldState = (typeof worldState)[keyof typeof worldState];

/** Upstream's fully qualified plugin name of a CSI volume. */
export function csiPluginName(driver: string): string {
  return `kubernetes.io/csi:${driver}`;
}

/** Volumes by [state, plugin_name] for one node (pure). */
export function countNodeVolumes(input: NodeReconcileInput): Map<WorldState, Map<string, number>> {
  const out = new Map<WorldState, Map<string, number>>();
  const add = (state: WorldState, plugin: string): void => {
    const byPlugin = out.get(state) ?? new Map<string, number>();
    byPlugin.set(plugin, (byPlugin.get(plugin) ?? 0) + 1);
    out.set(state, byPlugin);
  };
  // Upstream's desired state holds only nodes that exist and let the controller attach for them.
  const managed = input.node?.metadata.annotations?.[annControllerManagedAttachDetach] !== undefined;
  if (managed)
    for (const v of desiredVolumes(input).values()) add(worldState.desired, csiPluginName(v.driver));
  // The actual state: what is attached to the node, whether or not anyone still wants it.
  for (const va of input.attachments)
    if (va.spec.nodeName === input.nodeName && va.status?.attached === true)
      add(worldState.actual, csiPluginName(va.spec.attacher));
  return out;
}

/** The last count of each node reconciled here, summed into attachdetach_controller_total_volumes. */
export class NodeVolumeCounts {
  private readonly gauge: Gauge<"plugin_name" | "state">;
  private readonly byNode = new Map<string, Map<WorldState, Map<string, number>>>();

  constructor(metrics: AttachDetachMetrics) {
    this.gauge = metrics.totalVolumes;
  }

  record(input: NodeReconcileInput): void {
    const counts = countNodeVolumes(input);
    if (counts.size === 0) this.byNode.delete(input.nodeName);
    else this.byNode.set(input.nodeName, counts);
    const sums = new Map<string, number>();
    for (const node of this.byNode.values())
      for (const [state, byPlugin] of node)
        for (const [plugin, n] of byPlugin) {
          const key = JSON.stringify([plugin, state]);
          sums.set(key, (sums.get(key) ?? 0) + n);
        }
    // Replace the whole set: a plugin or state with nothing left drops out, as upstream's does.
    this.gauge.reset();
    for (const [key, n] of sums) {
      const [plugin_name, state] = JSON.parse(key) as [string, string];
      this.gauge.set({ plugin_name, state }, n);
    }
  }
}
