// What the sandbox's scheduler, kubelets and pod gc share: a JSON client and
// logger of their own, a watch copy of the kinds they read (their own, or one
// shared with others and stopped by its owner), and a Reactor that runs their
// pass on a period and, when they react to changes, after every change.
import type { KubeConfig } from "@kubernetes/client-node";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import type { ResourceDescriptor } from "../../shared/kube/resources.ts";
import { createLogger, type Logger } from "../../shared/log.ts";
import { Reactor } from "./reactor.ts";
import { WatchCache } from "./watch-cache.ts";

/** The options every loop-driven sandbox component takes. */
export interface WatchLoopHost {
  kubeConfig: KubeConfig;
  log?: Logger;
  /** A watch copy shared with other components (started here, stopped by its owner); default its own. */
  cache?: WatchCache;
}

export interface WatchLoopSpec {
  /** The logger's name, and the user agent unless userAgent is given. */
  name: string;
  userAgent?: string;
  kinds: readonly ResourceDescriptor[];
  pass: () => Promise<void>;
  periodMs: number;
  /** Whether every watched change brings a pass, besides the period; default yes. */
  onChange?: boolean;
}

export class WatchLoop {
  readonly json: KubeJsonClient;
  readonly log: Logger;
  readonly cache: WatchCache;
  private readonly reactor: Reactor;
  private readonly ownsCache: boolean;
  private readonly unsubscribe: () => void;
  private readonly onChange: boolean;

  constructor(host: WatchLoopHost, spec: WatchLoopSpec) {
    const log = host.log ?? createLogger({ name: spec.name, level: "warn" });
    this.log = log;
    this.json = new KubeJsonClient(host.kubeConfig, { userAgent: spec.userAgent ?? spec.name });
    this.reactor = new Reactor(spec.pass, spec.periodMs, (err) =>
      log.warn({ err }, `${spec.name} pass failed`),
    );
    this.ownsCache = host.cache === undefined;
    this.cache =
      host.cache ??
      new WatchCache({ kubeConfig: host.kubeConfig, json: this.json, resources: spec.kinds, log });
    if (!this.cache.covers(spec.kinds))
      throw new Error(`the watch cache given to ${spec.name} lacks kinds it reads`);
    this.onChange = spec.onChange ?? true;
    // A shared copy also carries other components' kinds; a change to one this loop does not read changes nothing it decides.
    const reads = new Set(spec.kinds);
    this.unsubscribe = this.onChange
      ? this.cache.subscribe((resource) => {
          if (reads.has(resource)) this.reactor.poke();
        })
      : () => {};
  }

  /** Records Events as `component` on `host`, warning through this loop's logger when one fails. */
  eventRecorder(component: string, host: string): EventRecorder {
    return new EventRecorder(this.json, {
      component,
      host,
      logger: { warn: (details, message) => this.log.warn(details, message) },
    });
  }

  /** Starts watching; resolves once the first lists are in. */
  async start(): Promise<void> {
    this.cache.start();
    await this.cache.synced();
    if (this.onChange) this.reactor.poke();
  }

  /** Stops reacting, waits for a running pass, stops the watch copy if it is ours and closes the client. */
  async stop(): Promise<void> {
    this.unsubscribe();
    await this.reactor.stop();
    if (this.ownsCache) await this.cache.stop();
    await this.json.close();
  }
}
