// Live lists of a namespace's pods, each made at most once per pass and only
// when a claim being deleted shows no user among the pods at hand (upstream's
// lazy live pod list). A pass creates this after reading its claims, so every
// list is newer than the claim copies it judges.
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { pods } from "../../kube/resources.ts";
import type { Pod } from "../../kube/types.ts";
import type { ProtectionMetrics } from "./protection-metrics.ts";

export class LivePodLists {
  private readonly kube: KubeJsonClient;
  private readonly metrics: ProtectionMetrics;
  private readonly lists = new Map<string, Promise<Pod[]>>();

  constructor(kube: KubeJsonClient, metrics: ProtectionMetrics) {
    this.kube = kube;
    this.metrics = metrics;
  }

  /** The namespace's pods; a failed list is forgotten so the next caller lists again. */
  podsIn(namespace: string): Promise<Pod[]> {
    let list = this.lists.get(namespace);
    if (list === undefined) {
      this.metrics.livePodLists.inc();
      list = this.kube.list<Pod>(pods, { namespace }).then((l) => l.items);
      list.catch(() => this.lists.delete(namespace));
      this.lists.set(namespace, list);
    }
    return list;
  }
}
