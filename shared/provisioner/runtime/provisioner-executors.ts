// Carries out the provisioner's steps, one executor per kind. Writes are
// whole objects conditional on the resourceVersion the decision read. A CSI
// call or a PV create never throws its failure here: the answer is carried
// to the next round, which decides what it means. Events are awaited in plan
// order (the recorder never throws).

import type { Executors } from "../../controller/index.ts";
import type { CsiClient } from "../../csi/client.ts";
import { classifyCsiError, GrpcCode, grpcCodeOf } from "../../csi/errors.ts";
import { RetryLaterError } from "../../http/errors.ts";
import { isAlreadyExists, isNotFound } from "../../kube/api-errors.ts";
import type { EventSink } from "../../kube/event-recorder.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import type { OwnRevisions } from "../../kube/own-revisions.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../kube/resources.ts";
import type { PersistentVolume } from "../../kube/types.ts";
import { retrying } from "../../retry.ts";
import { takeBackFailure } from "../plan-take-back.ts";
import type { CsiFailure, ProvisionerFact, ProvisionerStep } from "../steps.ts";
import type { ProvisionerMetrics } from "./provisioner-metrics.ts";
import { protectSource, releaseSource } from "./source-protection.ts";

interface ExecutorDeps {
  kube: KubeJsonClient;
  csi: CsiClient;
  events: EventSink;
  metrics: ProvisionerMetrics;
  /** Notes every PV this process writes, so that older event copies of it are skipped. */
  written: OwnRevisions;
}

function csiFailure(error: unknown, nodeSelected: boolean): CsiFailure {
  return {
    errorClass: classifyCsiError(error, { nodeSelected }),
    alreadyExists: grpcCodeOf(error) === GrpcCode.ALREADY_EXISTS,
    text: error instanceof Error ? error.message : String(error),
    error,
  };
}

/** DeleteVolume; already gone is what was wanted (upstream retried NOT_FOUND forever: external-provisioner 1277). */
async function deleteBackingVolume(
  csi: CsiClient,
  volumeId: string,
  secrets: Record<string, string> | undefined,
): Promise<void> {
  try {
    await csi.deleteVolume({ volumeId, ...(secrets ? { secrets } : {}) });
  } catch (err) {
    if (grpcCodeOf(err) !== GrpcCode.NOT_FOUND) throw err;
  }
}

export function provisionerExecutors<K>({
  kube,
  csi,
  events,
  metrics,
  written,
}: ExecutorDeps): Executors<ProvisionerStep, K, ProvisionerFact> {
  return {
    async event(step, run) {
      await events.event(step.object, step.type, step.reason, step.message);
      if (step.announces) run.carry({ announced: true });
      return { events: 1 };
    },
    async "add-intent-finalizer"(step, run) {
      run.carry({ claim: await kube.replace(persistentVolumeClaims, step.claim) });
      return 1;
    },
    async "write-claim"(step) {
      await kube.replace(persistentVolumeClaims, step.claim);
      return 1;
    },
    async "write-volume"(step) {
      written.note(await kube.replace(persistentVolumes, step.volume));
      return 1;
    },
    async "protect-source"(step) {
      await protectSource(kube, step.source);
      return 0;
    },
    async "release-source"(step) {
      await releaseSource(kube, step.source);
      return 0;
    },
    async "create-volume"(step, run) {
      try {
        const response = await csi.createVolume(step.request);
        if (!response.volume) throw new Error("CreateVolume returned no volume");
        run.carry({ created: response.volume });
      } catch (err) {
        run.carry({ createFailed: csiFailure(err, step.nodeSelected) });
      }
      return 0;
    },
    async "create-pv"(step, run) {
      try {
        written.note(await kube.create(persistentVolumes, step.volume));
        run.carry({ saved: true });
        return 1;
      } catch (err) {
        if (!isAlreadyExists(err)) {
          run.carry({ saveFailed: err });
          return 0;
        }
      }
      try {
        run.carry({ found: await kube.get<PersistentVolume>(persistentVolumes, step.volume.metadata.name) });
      } catch (err) {
        run.carry({ saveFailed: err });
      }
      return 0;
    },
    async "delete-volume"(step, run) {
      try {
        await deleteBackingVolume(csi, step.volumeId, step.secrets);
        run.carry({ volumeDeleted: true });
      } catch (err) {
        run.carry({ deleteFailed: csiFailure(err, false) });
      }
      return 0;
    },
    async "take-back-volume"(step) {
      try {
        await retrying(() => deleteBackingVolume(csi, step.volumeId, step.secrets), {
          maxAttempts: 4,
          baseDelayMs: 100,
          retryable: () => true,
        });
      } catch (err) {
        throw new RetryLaterError(takeBackFailure(step.volumeId, step.claimKey, err), 1, {
          cause: step.cause,
        });
      }
      return 0;
    },
    async "delete-pv"(step, run) {
      const { name, uid = "" } = step.volume.metadata;
      try {
        // Only this incarnation of the PV; what finalizers still hold comes back.
        const held = await kube.delete(persistentVolumes, name, undefined, { preconditions: { uid } });
        written.note(held as PersistentVolume | undefined);
        run.carry({ pvDeleted: { remaining: held as PersistentVolume | undefined } });
      } catch (err) {
        if (!isNotFound(err)) throw err;
        run.carry({ pvDeleted: { remaining: undefined } });
      }
      return 1;
    },
    async count(step) {
      metrics[step.metric].inc(step.labels);
      if (step.since !== undefined) {
        const seconds = (performance.now() - step.since) / 1000;
        if (step.metric === "provisionTotal") metrics.provisionDuration.observe(step.labels, seconds);
        if (step.metric === "deleteTotal") metrics.deleteDuration.observe(step.labels, seconds);
      }
      return 0;
    },
    async "retry-later"(step) {
      throw new RetryLaterError(step.message, 1, { cause: step.cause });
    },
    async throw(step) {
      throw step.error;
    },
  };
}
