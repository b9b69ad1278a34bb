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

export function provisionerMetrics(registry: Registry = processMetrics()): ProvisionerMetrics {
  return {
    provisionTotal: counter(registry, {
      name: "controller_persistentvolumeclaim_provision_total",
      help: "Total number of successful volume provisions",
      labelNames: ["class", "source"],
    }),
    provisionFailed: counter(registry, {
      name: "controller_persistentvolumeclaim_provision_failed_total",
      help: "Total number of failed volume provisions",
      labelNames: ["class", "source"],
    }),
    provisionDuration: histogram(registry, {
      name: "controller_persistentvolumeclaim_provision_duration_seconds",
      help: "Latency in seconds to provision a volume",
      labelNames: ["class", "source"],
    }),
    deleteTotal: counter(registry, {
      name: "controller_persistentvolume_delete_total",
      help: "Total number of successful volume deletions",
      labelNames: ["class"],
    }),
    deleteFailed: counter(registry, {
      name: "controller_persistentvolume_delete_failed_total",
      help: "Total number of failed volume deletions",
      labelNames: ["class"],
    }),
    deleteDuration: histogram(registry, {
      name: "controller_persistentvolume_delete_duration_seconds",
      help: "Latency in seconds to delete a volume",
      labelNames: ["class"],
    }),
  };
}
