// Upstream-compatible provisioning and deletion metrics of the external-provisioner.
import type { Counter, Histogram } from "prom-client";
import { counter, histogram, processMetrics, type Registry } from "../../metrics.ts";

export interface ProvisionerMetrics {
  provisionTotal: Counter<"class" | "source">;
  provisionFailed: Counter<"class" | "source">;
  provisionDuration: Histogram<"class" | "source">;
  deleteTotal: Counter<"class">;
  deleteFailed: Counter<"class">;
  deleteDuration: Histogram<"class">;
}

interface OperationMetrics<L extends string> {
  total: Counter<L>;
  failed: Counter<L>;
  duration: Histogram<L>;
}

/** Upstream names each operation's three metrics <prefix>_total, <prefix>_failed_total and <prefix>_duration_seconds. */
function operationMetrics<L extends string>(
  registry: Registry,
  prefix: string,
  labelNames: readonly L[],
  words: { verb: string; noun: string },
): OperationMetrics<L> {
  return {
    total: counter(registry, {
      name: `${prefix}_total`,
      help: `Total number of successful volume ${words.noun}`,
      labelNames,
    }),
    failed: counter(registry, {
      name: `${prefix}_failed_total`,
      help: `Total number of failed volume ${words.noun}`,
      labelNames,
    }),
    duration: histogram(registry, {
      name: `${prefix}_duration_seconds`,
      help: `Latency in seconds to ${words.verb} a volume`,
      labelNames,
    }),
  };
}

export function provisionerMetrics(registry: Registry = processMetrics()): ProvisionerMetrics {
  const provision = operationMetrics(
    registry,
    "controller_persistentvolumeclaim_provision",
    ["class", "source"],
    {
      verb: "provision",
      noun: "provisions",
    },
  );
  const deletion = operationMetrics(registry, "controller_persistentvolume_delete", ["class"], {
    verb: "delete",
    noun: "deletions",
  });
  return {
    provisionTotal: provision.total,
    provisionFailed: provision.failed,
    provisionDuration: provision.duration,
    deleteTotal: deletion.total,
    deleteFailed: deletion.failed,
    deleteDuration: deletion.duration,
  };
}
