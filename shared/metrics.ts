// Prometheus metrics on an explicit Registry instead of prom-client's global
// default: a process serves one function and uses `processMetrics()`, while
// tests can build several apps side by side, each with `createMetricsRegistry()`.
//
// The helpers are get-or-create, so two modules (or two apps sharing the
// process registry) asking for the same metric get the same instance instead
// of prom-client's "already registered" error.

import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

export type { Registry } from "prom-client";

export interface RegistryOptions {
  /** process_cpu_seconds_total, nodejs_heap_size_bytes, event loop lag, ... Default true. */
  defaultMetrics?: boolean;
}

export function createMetricsRegistry(options: RegistryOptions = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  return registry;
}

let processRegistry: Registry | undefined;

/** The registry a serving process exposes on /metrics, created on first use. */
export function processMetrics(): Registry {
  processRegistry ??= createMetricsRegistry();
  return processRegistry;
}

export interface MetricSpec<L extends string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
}

export interface HistogramSpec<L extends string> extends MetricSpec<L> {
  /** Upper bounds in the metric's unit; default suits request durations in seconds. */
  buckets?: number[];
}

/** Seconds; from a cache hit to a slow CSI CreateVolume. */
export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** The metric registered under spec.name, or a new one made by `create`; a name taken by another type throws. */
function getOrCreate<M>(
  registry: Registry,
  name: string,
  type: abstract new (...args: never[]) => M,
  create: () => M,
): M {
  const found = registry.getSingleMetric(name);
  if (found === undefined) return create();
  if (!(found instanceof type)) throw new Error(`metric ${name} is already registered with another type`);
  return found as M;
}

function configOf<L extends string>(registry: Registry, spec: MetricSpec<L>) {
  return { name: spec.name, help: spec.help, labelNames: spec.labelNames ?? [], registers: [registry] };
}

export function counter<L extends string = string>(registry: Registry, spec: MetricSpec<L>): Counter<L> {
  return getOrCreate<Counter<L>>(
    registry,
    spec.name,
    Counter,
    () => new Counter<L>(configOf(registry, spec)),
  );
}

export function gauge<L extends string = string>(registry: Registry, spec: MetricSpec<L>): Gauge<L> {
  return getOrCreate<Gauge<L>>(registry, spec.name, Gauge, () => new Gauge<L>(configOf(registry, spec)));
}

export function histogram<L extends string = string>(
  registry: Registry,
  spec: HistogramSpec<L>,
): Histogram<L> {
  const create = () =>
    new Histogram<L>({ ...configOf(registry, spec), buckets: spec.buckets ?? DURATION_BUCKETS });
  return getOrCreate<Histogram<L>>(registry, spec.name, Histogram, create);
}

export type RequestLabel = "function" | "route" | "outcome";

/**
 * What happened to a request, for the `outcome` label: ok (2xx), bad_request
 * (4xx), retry (503: transient, the sender should retry), error (other 5xx),
 * aborted (the client went away before the answer).
 */
export type RequestOutcome = "ok" | "bad_request" | "retry" | "error" | "aborted";

export function outcomeOfStatus(status: number): RequestOutcome {
  if (status < 400) return "ok";
  if (status < 500) return "bad_request";
  return status === 503 ? "retry" : "error";
}

export interface RequestMetrics {
  requests: Counter<RequestLabel>;
  duration: Histogram<RequestLabel>;
  observe(labels: Record<RequestLabel, string>, seconds: number): void;
}

export function requestMetrics(registry: Registry): RequestMetrics {
  const labelNames = ["function", "route", "outcome"] as const;
  const requests = counter(registry, {
    name: "function_requests_total",
    help: "HTTP requests answered by the function, by route and outcome",
    labelNames,
  });
  const duration = histogram(registry, {
    name: "function_request_duration_seconds",
    help: "Time from request start to answer, by route and outcome",
    labelNames,
  });
  return {
    requests,
    duration,
    observe(labels, seconds) {
      requests.inc(labels);
      duration.observe(labels, seconds);
    },
  };
}
