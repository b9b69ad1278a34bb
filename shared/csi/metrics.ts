// The CSI sidecars' per-call histogram, with upstream's name, labels and
// buckets, so existing dashboards and alerts keep working:
//   csi_sidecar_operations_seconds{driver_name, method_name, grpc_status_code}
// method_name is the full gRPC method (/csi.v1.Controller/CreateVolume) and
// grpc_status_code Go's code name ("OK", "DeadlineExceeded", ...).

import type { Histogram } from "prom-client";
import type { Registry } from "../metrics.ts";
import { histogram, processMetrics } from "../metrics.ts";
import { grpcCodeName } from "./errors.ts";

export const CSI_OPERATIONS_METRIC = "csi_sidecar_operations_seconds";

/** Seconds; upstream's buckets reach 10 minutes for slow CreateVolume / snapshot calls. */
export const CSI_OPERATION_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600];

export type CsiOperationLabel = "driver_name" | "method_name" | "grpc_status_code";

export function csiOperationsHistogram(registry: Registry = processMetrics()): Histogram<CsiOperationLabel> {
  return histogram(registry, {
    name: CSI_OPERATIONS_METRIC,
    help: "Duration of CSI gRPC calls to the driver, by driver, full method name and gRPC status code",
    labelNames: ["driver_name", "method_name", "grpc_status_code"],
    buckets: CSI_OPERATION_BUCKETS,
  });
}

export interface CsiOperation {
  /** "" until the driver name is known, as upstream does before GetPluginInfo. */
  driverName: string;
  method: string;
  /** Numeric gRPC code; undefined (not a gRPC status) is recorded as Unknown. */
  code: number | undefined;
  seconds: number;
}

export function recordCsiOperation(metric: Histogram<CsiOperationLabel>, operation: CsiOperation): void {
  metric.observe(
    {
      driver_name: operation.driverName,
      method_name: operation.method,
      grpc_status_code: grpcCodeName(operation.code),
    },
    operation.seconds,
  );
}
