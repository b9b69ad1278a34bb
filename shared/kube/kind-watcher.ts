// Watches one kind with client-node's ListWatch (list, then watch from the
// list's resourceVersion; on 410 Gone it relists and reports the difference
// as add/update/delete) and keeps it running.
//
// What ListWatch (client-node 2.0.x) does on its own and what it does not:
// - a watch the server closes, or a client-side inactivity timeout: it
//   reconnects from the last resourceVersion by itself;
// - 410 Gone (an HTTP 410 or an ERROR event in the stream): it relists, emits
//   delete for objects that are gone, update for changed ones (by
//   resourceVersion), add for new ones, and watches again;
// - any other failure (list error, non-200 watch, connection refused or reset,
//   abort): it emits "error" and STOPS for good. This module restarts it with
//   exponential backoff and jitter; start() keeps the last resourceVersion, so
//   a restart resumes the watch, and a resume that is too old gets 410 and
//   relists.
// The list goes through KubeJsonClient (plain JSON, paged, kept-alive), so
// objects keep every field and timestamps stay strings, exactly as watch
// events deliver them.

import { setTimeout as sleep } from "node:timers/promises";
import {
  ADD,
  DELETE,
  ERROR,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  ListWatch,
  UPDATE,
} from "@kubernetes/client-node";
import type { Logger } from "../log.ts";
import type { KubeJsonClient } from "./json-client.ts";
import { KubeWatch } from "./kube-watch.ts";
import { apiVersionOf, collectionPathOf, type ResourceDescriptor } from "./resources.ts";
import type { KubeObject } from "./types.ts";

/** What happened to an object, as a watch reports it. */
export type WatchAction = "add" | "update" | "delete";

export interface BackoffOptions {
  baseMs: number;
  maxMs: number;
}

export const DEFAULT_INFORMER_BACKOFF: BackoffOptions = { baseMs: 500, maxMs: 30_000 };

export interface KindWatcherOptions {
  kubeConfig: KubeConfig;
  json: KubeJsonClient;
  resource: ResourceDescriptor;
  onChange(action: WatchAction, object: KubeObject): void;
  /** Emit add for the objects of the initial list (a startup resync). Default true. */
  replayExisting?: boolean;
  backoff?: BackoffOptions;
  log: Logger;
  onRestart?(): void;
  onSynced?(): void;
  /** A list's objects have all been dispatched and the watch from its resourceVersion is starting. */
  onListed?(resourceVersion: string | undefined): void;
}

export class KindWatcher {
  readonly resource: ResourceDescriptor;
  /** Resolves once the initial list has been dispatched (and the watch is starting). */
  readonly synced: Promise<void>;
  private readonly options: KindWatcherOptions;
  private readonly informer: ListWatch<KubernetesObject>;
  private readonly watch: KubeWatch;
  private readonly backoff: BackoffOptions;
  private readonly log: Logger;
  private resolveSynced: () => void = () => undefined;
  private isSynced = false;
  private stopped = false;
  private readonly stopping = new AbortController();
  private started = false;
  private failures = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private restartCount = 0;
  /** The list ListWatch is about to dispatch; reported once the watch after it starts. */
  private listedVersion: { rv: string | undefined } | undefined;

  constructor(options: KindWatcherOptions) {
    this.options = options;
    this.resource = options.resource;
    this.backoff = options.backoff ?? DEFAULT_INFORMER_BACKOFF;
    this.log = options.log.child({ kind: options.resource.kind });
    this.synced = new Promise((resolve) => {
      this.resolveSynced = resolve;
    });
    this.watch = new KubeWatch(options.kubeConfig, {
      onStart: () => {
        this.reportListed();
        this.markSynced();
      },
      onEstablished: () => {
        this.failures = 0;
      },
      onBadEvent: (problem, detail) => this.log.warn({ detail }, problem),
    });
    this.informer = new ListWatch<KubernetesObject>(
      collectionPathOf(options.resource),
      this.watch,
      () => this.list(),
      false,
      undefined,
      undefined,
      // ListWatch waits up to 30 s between reconnects; cut that short on
      // stop() so no timer outlives the forwarder.
      { delayFn: (ms) => sleep(ms, undefined, { signal: this.stopping.signal }).catch(() => undefined) },
    );
    this.informer.on(ADD, (obj) => this.emit("add", obj));
    this.informer.on(UPDATE, (obj) => this.emit("update", obj));
    this.informer.on(DELETE, (obj) => this.emit("delete", obj));
    this.informer.on(ERROR, (err: unknown) => this.failed(err));
  }

  get hasSynced(): boolean {
    return this.isSynced;
  }

  get restarts(): number {
    return this.restartCount;
  }

  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    this.run();
  }

  /** Stops watching for good; emits nothing afterwards. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    this.watch.close();
    await this.informer.stop();
  }

  private run(): void {
    // start() rejects only if ListWatch itself throws; treat it like its "error" event.
    this.informer.start().catch((err: unknown) => this.failed(err));
  }

  private async list(): Promise<KubernetesListObject<KubernetesObject>> {
    if (this.stopped) throw new Error("forwarder stopping");
    const result = await this.options.json.list<KubeObject>(this.resource);
    // Same JSON objects, seen through client-node's structural type (its
    // metadata declares Date timestamps; ours stay strings, as on the wire).
    const items = result.items as unknown as KubernetesObject[];
    this.listedVersion = { rv: result.resourceVersion };
    return { metadata: { resourceVersion: result.resourceVersion }, items };
  }

  private failed(err: unknown): void {
    if (this.stopped || this.restartTimer !== undefined) return;
    this.failures++;
    const nominal = Math.min(this.backoff.maxMs, this.backoff.baseMs * 2 ** Math.min(this.failures - 1, 30));
    const delayMs = Math.round(nominal / 2 + (Math.random() * nominal) / 2);
    this.log.warn({ err, failures: this.failures, delayMs }, "list/watch failed; restarting");
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (this.stopped) return;
      this.restartCount++;
      this.options.onRestart?.();
      this.run();
    }, delayMs);
  }

  private reportListed(): void {
    const listed = this.listedVersion;
    this.listedVersion = undefined;
    if (!listed || this.stopped) return;
    try {
      this.options.onListed?.(listed.rv);
    } catch (err) {
      this.log.error({ err }, "reporting a list failed");
    }
  }

  private markSynced(): void {
    if (this.isSynced) return;
    this.isSynced = true;
    this.log.info("initial list dispatched; watching");
    this.options.onSynced?.();
    this.resolveSynced();
  }

  private emit(action: WatchAction, raw: KubernetesObject): void {
    if (this.stopped) return;
    // Before the first watch, adds are the initial list: existing objects.
    if (action === "add" && !this.isSynced && this.options.replayExisting === false) return;
    const object = this.asKubeObject(raw);
    if (object === undefined) return;
    try {
      this.options.onChange(action, object);
    } catch (err) {
      // A throw here would escape into ListWatch's stream handler and end the watch.
      this.log.error({ err }, "dispatching a change failed");
    }
  }

  /** Watch events carry apiVersion/kind; lists do not (KubeJsonClient fills them in); both are checked. */
  private asKubeObject(raw: KubernetesObject): KubeObject | undefined {
    const value = raw as unknown as Partial<KubeObject>;
    const name = value.metadata?.name;
    if (typeof name !== "string" || name === "") {
      this.log.warn({ resourceVersion: value.metadata?.resourceVersion }, "object without a name; skipped");
      return undefined;
    }
    return {
      ...value,
      apiVersion: value.apiVersion || apiVersionOf(this.resource),
      kind: value.kind || this.resource.kind,
      metadata: value.metadata!,
    } as KubeObject;
  }
}
