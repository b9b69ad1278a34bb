// The forwarder's Prometheus metrics. Destinations are labelled by their
// redacted URL (no query, no credentials), kinds by kind name.

import type { Counter, Gauge, Histogram } from "prom-client";
import { counter, gauge, histogram, type Registry } from "../metrics.ts";

export type DeliveryLabel = "destination" | "kind";
export type FailureLabel = DeliveryLabel | "reason";

/** Why a change never reached a destination. */
export type FailureReason = "rejected" | "retries_exhausted" | "queue_full" | "shutdown";

export interface ForwarderMetrics {
  delivered: Counter<DeliveryLabel>;
  failed: Counter<FailureLabel>;
  retried: Counter<DeliveryLabel>;
  coalesced: Counter<DeliveryLabel>;
  queueDepth: Gauge<"destination">;
  inFlight: Gauge<"destination">;
  deliverySeconds: Histogram<"destination" | "outcome">;
  informerRestarts: Counter<"kind">;
  informerSynced: Gauge<"kind">;
}

export function forwarderMetrics(registry: Registry): ForwarderMetrics {
  return {
    delivered: counter(registry, {
      name: "forwarder_events_delivered_total",
      help: "Changes a destination accepted (2xx), by destination and kind",
      labelNames: ["destination", "kind"],
    }),
    failed: counter(registry, {
      name: "forwarder_events_failed_total",
      help: "Changes given up on: rejected (4xx), retries_exhausted, queue_full, shutdown",
      labelNames: ["destination", "kind", "reason"],
    }),
    retried: counter(registry, {
      name: "forwarder_delivery_retries_total",
      help: "Delivery attempts repeated after a transient failure (429, 5xx, transport error)",
      labelNames: ["destination", "kind"],
    }),
    coalesced: counter(registry, {
      name: "forwarder_events_coalesced_total",
      help: "Changes folded into a newer state of the same object before delivery",
      labelNames: ["destination", "kind"],
    }),
    queueDepth: gauge(registry, {
      name: "forwarder_queue_depth",
      help: "Changes waiting for delivery (not in flight), by destination",
      labelNames: ["destination"],
    }),
    inFlight: gauge(registry, {
      name: "forwarder_deliveries_in_flight",
      help: "Deliveries under way (including those waiting to retry), by destination",
      labelNames: ["destination"],
    }),
    deliverySeconds: histogram(registry, {
      name: "forwarder_delivery_duration_seconds",
      help: "From the first attempt to the end of one delivery, retries included, by outcome",
      labelNames: ["destination", "outcome"],
    }),
    informerRestarts: counter(registry, {
      name: "forwarder_informer_restarts_total",
      help: "List/watch loops restarted after an error, by kind",
      labelNames: ["kind"],
    }),
    informerSynced: gauge(registry, {
      name: "forwarder_informer_synced",
      help: "1 once the kind's initial list has been dispatched",
      labelNames: ["kind"],
    }),
  };
}
