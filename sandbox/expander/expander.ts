// The sandbox's stand-in for kube-controller-manager's volume expand
// controller (persistentvolume-expander), which stays on beside our
// functions in every install mode: on every claim change it tells each
// claim decide.ts names that an external controller is to expand it.
import type { EventRecorder } from "../../shared/kube/event-recorder.ts";
import {
  persistentVolumeClaims,
  persistentVolumes,
  type ResourceDescriptor,
} from "../../shared/kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { WatchLoop, type WatchLoopHost } from "../cluster/watch-loop.ts";
import {
  claimsWaitingForExternalExpansion,
  externalExpandingMessage,
  externalExpandingReason,
  type SeenClaim,
} from "./decide.ts";

/** What the expand controller reads. */
export const expanderKinds: readonly ResourceDescriptor[] = [persistentVolumeClaims, persistentVolumes];

/** Upstream's recorder component for this controller. */
export const expanderComponent = "volume_expand";

export class SandboxExpander {
  private readonly loop: WatchLoop;
  private readonly events: EventRecorder;
  private readonly seen = new Map<string, SeenClaim>();

  constructor(options: WatchLoopHost) {
    this.loop = new WatchLoop(options, {
      name: "sandbox-expander",
      kinds: expanderKinds,
      pass: () => this.pass(),
      // Changes drive it, as upstream's informer handlers; a pass with nothing new tells no one.
      periodMs: 30_000,
    });
    this.events = this.loop.eventRecorder(expanderComponent, "");
  }

  async start(): Promise<void> {
    await this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  private async pass(): Promise<void> {
    const due = claimsWaitingForExternalExpansion(
      this.loop.cache.list<PersistentVolumeClaim>(persistentVolumeClaims),
      this.loop.cache.list<PersistentVolume>(persistentVolumes),
      this.seen,
    );
    // Best effort, as upstream's recorder: a failed Event is logged by the recorder and not retried.
    for (const claim of due)
      await this.events.event(claim, "Normal", externalExpandingReason, externalExpandingMessage);
  }
}
