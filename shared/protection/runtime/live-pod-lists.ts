// Live lists of a namespace's pods, shared by every claim check of the
// process that needs one (upstream's one LIST per namespace batch). A check
// may use a list only if the list was started after its claim copy, with the
// deletionTimestamp it judges, was in hand: pods created later cannot start
// using a claim being deleted, so such a list sees every possible user. A
// list already in flight that started too early is not joined: the check
// waits for the next one, which starts when it ends and serves everyone
// that waited meanwhile.
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { pods } from "../../kube/resources.ts";
import type { Pod } from "../../kube/types.ts";
import type { ProtectionMetrics } from "./protection-metrics.ts";

interface InFlight {
  startedAt: number;
  list: Promise<Pod[]>;
}

export class LivePodLists {
  private readonly kube: KubeJsonClient;
  private readonly metrics: ProtectionMetrics;
  private readonly inFlight = new Map<string, InFlight>();
  private readonly next = new Map<string, Promise<Pod[]>>();

  constructor(kube: KubeJsonClient, metrics: ProtectionMetrics) {
    this.kube = kube;
    this.metrics = metrics;
  }

  /**
   * The namespace's pods from a list started at or after `since`
   * (performance.now() when the caller's claim copy was in hand). A failed
   * list fails its callers; the next caller lists again.
   */
  podsIn(namespace: string, since: number): Promise<Pod[]> {
    const current = this.inFlight.get(namespace);
    if (current === undefined) return this.start(namespace).list;
    if (current.startedAt >= since) return current.list;
    let waiting = this.next.get(namespace);
    if (waiting === undefined) {
      const settled = current.list.then(
        () => undefined,
        () => undefined,
      );
      waiting = settled.then(() => {
        this.next.delete(namespace);
        return this.start(namespace).list;
      });
      this.next.set(namespace, waiting);
    }
    return waiting;
  }

  private start(namespace: string): InFlight {
    this.metrics.livePodLists.inc();
    const entry: InFlight = {
      startedAt: performance.now(),
      list: this.kube.list<Pod>(pods, { namespace }).then((l) => l.items),
    };
    this.inFlight.set(namespace, entry);
    const done = (): void => {
      if (this.inFlight.get(namespace) === entry) this.inFlight.delete(namespace);
    };
    entry.list.then(done, done);
    return entry;
  }
}
