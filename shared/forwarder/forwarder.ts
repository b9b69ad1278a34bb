// The event forwarder: watches the API server for the routed kinds and
// delivers every change to every destination whose route includes its kind,
// as Knative ApiServerSource (Resource mode) would, with at-least-once
// delivery, per-object order and bounded memory per destination.
//
// One KindWatcher per kind (shared by every destination), one DeliveryQueue +
// EventSender per destination. The watchers only enqueue, never wait, so a
// destination that is slow or down fills (and then sheds) its own queue and
// nothing else.

import type { KubeConfig } from "@kubernetes/client-node";
import type { ResourceAction } from "../events/index.ts";
import { KubeJsonClient } from "../kube/json-client.ts";
import { type BackoffOptions, KindWatcher } from "../kube/kind-watcher.ts";
import type { ResourceDescriptor } from "../kube/resources.ts";
import type { KubeObject } from "../kube/types.ts";
import { createLogger, type Logger } from "../log.ts";
import { processMetrics, type Registry } from "../metrics.ts";
import { newChange } from "./change.ts";
import { Destination, type DestinationStats } from "./destination.ts";
import { forwarderMetrics } from "./metrics.ts";
import { DEFAULT_RETRY, type RetryOptions } from "./retry-policy.ts";
import { normalizeRoutes, type Route } from "./routes.ts";
import { WATCHABLE_KINDS } from "./watched-kinds.ts";

export interface ForwarderOptions {
  kubeConfig: KubeConfig;
  routes: Route[];
  /** Deliveries in flight per destination (retry waits included). Default 16. */
  concurrency?: number;
  /** Changes one delivery may carry, as a CloudEvents batch, when a backlog builds up. Default 32; 1: never batch. */
  maxBatch?: number;
  /** Changes waiting per destination before new ones are dropped. Default 10 000. */
  maxQueue?: number;
  /** Sent as `Authorization: Bearer <token>` to every destination. */
  authToken?: string;
  /** Per delivery attempt: to connect, for the answer's headers and for each pause in its body. Default 30 s. */
  requestTimeoutMs?: number;
  retry?: Partial<RetryOptions>;
  /** Restart backoff of a failed list/watch. Default 500 ms doubling to 30 s. */
  informerBackoff?: BackoffOptions;
  /** Deliver an add for every object that exists at start (a startup resync). Default true. */
  replayExisting?: boolean;
  /** How long close() keeps delivering what is queued and in flight. Default 10 s. */
  shutdownGraceMs?: number;
  /** ce-source. Default: the kubeconfig's API server URL. */
  source?: string;
  logger?: Logger;
  /** Default: the process registry (shared/metrics processMetrics()). */
  metrics?: Registry;
}

export interface KindStats {
  synced: boolean;
  restarts: number;
}

export type { DestinationStats } from "./destination.ts";

export interface ForwarderStats {
  synced: boolean;
  kinds: Record<string, KindStats>;
  destinations: DestinationStats[];
}

export interface Forwarder {
  /** Resolves once every kind's initial list is dispatched; rejects if closed before. */
  ready: Promise<void>;
  stats(): ForwarderStats;
  /** Stops watching, delivers what is queued within the grace period, drops the rest. Idempotent. */
  close(): Promise<void>;
}

export const DEFAULT_CONCURRENCY = 16;
export const DEFAULT_MAX_BATCH = 32;
export const DEFAULT_MAX_QUEUE = 10_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000;

export function startForwarder(options: ForwarderOptions): Forwarder {
  const log = options.logger ?? createLogger({ name: "forwarder" });
  const metrics = forwarderMetrics(options.metrics ?? processMetrics());
  const routes = normalizeRoutes(options.routes);
  if (routes.length === 0) throw new Error("startForwarder: no routes, so nothing to watch or deliver");
  const concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
  const maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
  const retry: RetryOptions = { ...DEFAULT_RETRY, ...options.retry };
  const graceMs = options.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
  const source = options.source ?? options.kubeConfig.getCurrentCluster()?.server;
  if (!source) throw new Error("startForwarder: the kubeconfig has no current cluster (ce-source)");
  const stopAll = new AbortController();

  const destinations = routes.map(
    (route) =>
      new Destination(route, {
        source,
        concurrency,
        maxBatch: options.maxBatch ?? DEFAULT_MAX_BATCH,
        maxQueue,
        retry,
        timeoutMs: options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
        signal: stopAll.signal,
        log,
        metrics,
        ...(options.authToken ? { authToken: options.authToken } : {}),
      }),
  );

  const json = new KubeJsonClient(options.kubeConfig);
  const kinds = [...new Set(routes.flatMap((r) => r.kinds))];
  const watchers = kinds.map((kind) => {
    const resource = WATCHABLE_KINDS.get(kind) as ResourceDescriptor;
    const routed = destinations.filter((d) => d.kinds.has(kind));
    return new KindWatcher({
      kubeConfig: options.kubeConfig,
      json,
      resource,
      log,
      replayExisting: options.replayExisting !== false,
      ...(options.informerBackoff ? { backoff: options.informerBackoff } : {}),
      onChange: (action, object) => dispatch(routed, action, resource, object),
      onRestart: () => metrics.informerRestarts.inc({ kind }),
      onSynced: () => metrics.informerSynced.set({ kind }, 1),
    });
  });
  for (const kind of kinds) metrics.informerSynced.set({ kind }, 0);

  function dispatch(
    routed: Destination[],
    action: ResourceAction,
    resource: ResourceDescriptor,
    object: KubeObject,
  ): void {
    // One change (one ce-id) for all destinations: the same event, fanned out.
    const change = newChange(action, resource, object);
    for (const destination of routed) destination.enqueue(change);
  }

  let rejectReady: (err: Error) => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    rejectReady = reject;
    void Promise.all(watchers.map((w) => w.synced)).then(() => {
      log.info({ kinds, destinations: destinations.map((d) => d.label) }, "informers synced");
      resolve();
    });
  });
  // close() may reject it; whoever awaits it sees that, and nobody else should crash on it.
  ready.catch(() => undefined);

  for (const watcher of watchers) watcher.start();

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      rejectReady(new Error("forwarder closed before its informers synced"));
      await Promise.all(watchers.map((w) => w.stop()));
      const drained = Promise.all(destinations.map((d) => d.idle()));
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        drained.then(() => false),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(true), graceMs);
        }),
      ]);
      clearTimeout(timer);
      if (timedOut) {
        const left = destinations.map((d) => {
          const { url, waiting, inFlight } = d.stats();
          return { destination: url, waiting, inFlight };
        });
        log.warn({ graceMs, left }, "shutdown grace period over; dropping undelivered changes");
      }
      for (const destination of destinations) destination.stopQueue();
      // Aborts retry waits and requests still running; they report "aborted".
      stopAll.abort();
      await drained;
      await Promise.all([...destinations.map((d) => d.close()), json.close()]);
      log.info({ destinations: destinations.map((d) => d.stats()) }, "forwarder stopped");
    })();
    return closing;
  };

  return {
    ready,
    close,
    stats: () => ({
      synced: watchers.every((w) => w.hasSynced),
      kinds: Object.fromEntries(
        watchers.map((w) => [w.resource.kind, { synced: w.hasSynced, restarts: w.restarts }]),
      ),
      destinations: destinations.map((d) => d.stats()),
    }),
  };
}
