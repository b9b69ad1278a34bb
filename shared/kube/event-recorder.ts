// Writes core/v1 Events the way kube controllers' recorders do, so kubectl
// describe shows the same Reason/Message/Count/Source as upstream.
//
// Upstream aggregates repeats in process memory and patches `count`. We keep no
// memory, so the Event name is derived from what the event says (involved uid,
// type, reason, message, component): any process repeating the same event hits
// the same name. The first report is one create; a repeat is a create that
// fails AlreadyExists, then a GET (a merge patch can set but not increment
// `count`) and a merge patch of count/lastTimestamp made conditional on the
// resourceVersion read, so concurrent repeats are not lost.
//
// Events are best effort: nothing here ever throws to the caller.

import { createHash } from "node:crypto";
import { hostname } from "node:os";
import { isAlreadyExists, isConflict, isNotFound } from "./api-errors.ts";
import type { KubeJsonClient } from "./json-client.ts";
import { events } from "./resources.ts";
import { rfc3339 } from "./time.ts";
import type { KubeEvent } from "./types.ts";

/** The object an Event is about: any Kubernetes object, typed loosely so every client's objects fit. */
export interface InvolvedObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export type EventType = "Normal" | "Warning";

/** Where controllers send Events: the recorder, or anything that records them for a test. */
export interface EventSink {
  event(object: InvolvedObject, type: EventType, reason: string, message: string): Promise<unknown>;
}

export interface EventRecordResult {
  /** created: new Event; bumped: existing Event's count raised; failed: nothing written (see error). */
  outcome: "created" | "bumped" | "failed";
  /** Event object name (also when failed, if it could be computed). */
  name?: string;
  namespace?: string;
  count?: number;
  error?: unknown;
}

export interface EventLogger {
  warn(details: object, message: string): void;
}

export interface EventRecorderOptions {
  /** source.component and reportingComponent, e.g. "persistentvolume-controller". */
  component: string;
  /** source.host and reportingInstance. Default: os.hostname(). */
  host?: string;
  now?: () => Date;
  logger?: EventLogger;
  /**
   * Write rounds per event (create, or read + conditional patch). A lost
   * `count` bump costs little; a handful covers concurrent repeats. Default 5.
   */
  maxTries?: number;
}

const consoleLogger: EventLogger = {
  warn: (details, message) => console.warn(JSON.stringify({ level: "warn", msg: message, ...details })),
};

// Names are DNS subdomains (max 253); the 17-character suffix must fit.
const SUFFIX_LENGTH = 16;
const MAX_PREFIX = 253 - SUFFIX_LENGTH - 1;

/** Deterministic Event name: same object + type + reason + message + component → same name. */
export function eventName(
  involved: InvolvedObject,
  component: string,
  type: EventType,
  reason: string,
  message: string,
): string {
  const m = involved.metadata ?? {};
  const identity = [
    m.uid ?? "",
    involved.kind ?? "",
    m.namespace ?? "",
    m.name ?? "",
    component,
    type,
    reason,
    message,
  ];
  const suffix = createHash("sha256").update(JSON.stringify(identity)).digest("hex").slice(0, SUFFIX_LENGTH);
  // A cut name may end in "-" or "."; a label must end alphanumeric.
  const prefix = (m.name ?? "").slice(0, MAX_PREFIX).replace(/[^a-z0-9]+$/, "");
  return `${prefix}.${suffix}`;
}

export class EventRecorder {
  readonly component: string;
  readonly host: string;
  private readonly kube: KubeJsonClient;
  private readonly now: () => Date;
  private readonly logger: EventLogger;
  private readonly maxTries: number;

  constructor(kube: KubeJsonClient, options: EventRecorderOptions) {
    this.kube = kube;
    this.component = options.component;
    this.host = options.host ?? hostname();
    this.now = options.now ?? (() => new Date());
    this.logger = options.logger ?? consoleLogger;
    this.maxTries = Math.max(1, options.maxTries ?? 5);
  }

  /** Records one Event about `involved`. Never throws; the result says what happened. */
  async event(
    involved: InvolvedObject,
    type: EventType,
    reason: string,
    message: string,
  ): Promise<EventRecordResult> {
    let name: string | undefined;
    let namespace: string | undefined;
    try {
      const meta = involved.metadata;
      if (!involved.kind || !meta?.name) {
        throw new Error("involved object needs kind and metadata.name");
      }
      name = eventName(involved, this.component, type, reason, message);
      // Cluster-scoped objects (PVs, VolumeAttachments) get their Events in "default", as upstream does.
      namespace = meta.namespace || "default";
      const result = await this.createOrBump(
        this.buildEvent(involved, name, namespace, type, reason, message),
      );
      return { ...result, name, namespace };
    } catch (error) {
      try {
        this.logger.warn(
          {
            component: this.component,
            event: name,
            namespace,
            involved: `${involved.kind ?? "?"}/${involved.metadata?.namespace ?? ""}/${involved.metadata?.name ?? "?"}`,
            reason,
            error: error instanceof Error ? error.message : String(error),
          },
          "could not record Event",
        );
      } catch {
        // A broken logger must not turn a lost Event into a failed operation either.
      }
      return { outcome: "failed", name, namespace, error };
    }
  }

  private buildEvent(
    involved: InvolvedObject,
    name: string,
    namespace: string,
    type: EventType,
    reason: string,
    message: string,
  ): KubeEvent {
    const meta = involved.metadata ?? {};
    const now = rfc3339(this.now());
    return {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name, namespace },
      involvedObject: {
        apiVersion: involved.apiVersion,
        kind: involved.kind,
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resourceVersion: meta.resourceVersion,
      },
      reason,
      message,
      type,
      source: { component: this.component, host: this.host },
      reportingComponent: this.component,
      reportingInstance: this.host,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
      // Series-style eventTime belongs to events.k8s.io; core/v1 recorders leave it null.
      eventTime: null,
    };
  }

  private async createOrBump(body: KubeEvent): Promise<Omit<EventRecordResult, "name" | "namespace">> {
    const name = body.metadata.name ?? "";
    const namespace = body.metadata.namespace ?? "default";
    let create = true;
    let lastError: unknown;
    for (let attempt = 0; attempt < this.maxTries; attempt++) {
      if (create) {
        try {
          const created = await this.kube.create<KubeEvent>(events, body);
          return { outcome: "created", count: created.count ?? 1 };
        } catch (err) {
          if (!isAlreadyExists(err)) throw err;
          create = false;
        }
      }
      try {
        const existing = await this.kube.get<KubeEvent>(events, name, namespace);
        const count = (existing.count ?? 1) + 1;
        const patch = {
          metadata: { resourceVersion: existing.metadata?.resourceVersion },
          count,
          lastTimestamp: rfc3339(this.now()),
        };
        const patched = await this.kube.patch<KubeEvent>(events, name, namespace, patch, "merge");
        return { outcome: "bumped", count: patched.count ?? count };
      } catch (err) {
        // Deleted (Event TTL) since the create: create again. Raced another bump: read again.
        if (isNotFound(err)) create = true;
        else if (!isConflict(err)) throw err;
        lastError = err;
      }
    }
    throw lastError;
  }
}
