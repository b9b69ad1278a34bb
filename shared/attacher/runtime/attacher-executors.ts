// The attacher's step kinds carried out: conditional patches of the PV and
// the VA, VA status writes, ControllerPublish / ControllerUnpublish, and the
// failure record. A step that continues a protocol carries the state it left
// (`resume` plus its answer) to the next round; an attach or detach step that
// fails for any reason but a lost race carries the failure, which the next
// round records (upstream's error texts and prefixes).

import { isDeepStrictEqual } from "node:util";
import type { Executors } from "../../controller/index.ts";
import type { CsiClient } from "../../csi/client.ts";
import { RetryLaterError } from "../../http/errors.ts";
import { lostToConcurrentWriter } from "../../kube/api-errors.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { updateObject } from "../../kube/optimistic-update.ts";
import type { OwnRevisions } from "../../kube/own-revisions.ts";
import { volumeAttachments } from "../../kube/resources.ts";
import type { RetryInterval } from "../../kube/retry-interval.ts";
import { TestFailedError } from "../../kube/tested-patch.ts";
import type { VolumeAttachment } from "../../kube/types.ts";
import { retrying } from "../../retry.ts";
import type { AttacherKey, AttacherStep, AttachmentState } from "../attacher-steps.ts";
import {
  couldNotProtectVolume,
  couldNotSaveAttachment,
  failedWith,
  releasedMeanwhile,
  withFailureProgress,
  withPublished,
  withStatusWritten,
  withVolumeSynced,
} from "../attachment-protocol.ts";
import { attachedStatus, detachedStatus, withAttachError, withDetachError } from "../attachment-status.ts";
import { withFailure, withoutBackoff } from "../backoff.ts";
import { ignoreNotFound, patchVolume, writeStatus } from "./attachment-writes.ts";
import { failureOf, messageOf } from "./load-attachment.ts";

export interface AttacherExecutorDeps {
  kube: KubeJsonClient;
  csi: CsiClient;
  now: () => Date;
  /** --retry-interval-start / -max of the backoff written on a failed attachment; default upstream's. */
  retryInterval?: RetryInterval | undefined;
  /** Attempts of the unpublish that takes back a publish nobody else will undo. */
  maxAttempts: number;
  /** The PV's own sync, once a detach may have freed it. */
  syncVolume: (name: string) => Promise<{ outcome: string }>;
  /** Each VolumeAttachment as this process last wrote it: older event copies need no sync. */
  written: OwnRevisions;
}

export function attacherExecutors(
  d: AttacherExecutorDeps,
): Executors<AttacherStep, AttacherKey, AttachmentState> {
  const { kube, csi, now } = d;

  /** Runs an attach or detach step; a failure other than a lost race goes to the next round. */
  async function orFailure(
    resume: AttachmentState,
    op: "attach" | "detach",
    work: () => Promise<AttachmentState>,
    carry: (s: AttachmentState) => void,
    prefix?: string,
  ): Promise<number> {
    try {
      carry(await work());
      return 1;
    } catch (err) {
      if (lostToConcurrentWriter(err)) throw err;
      carry(failedWith(resume, failureOf(op, err, now(), prefix)));
      return 0;
    }
  }

  return {
    "add-volume-finalizer": (step, run) =>
      orFailure(
        step.resume,
        "attach",
        async () => ({ ...step.resume, pv: await patchVolume(kube, step.name, step.patch) }),
        run.carry,
        couldNotProtectVolume,
      ),
    "prepare-attachment": (step, run) =>
      orFailure(
        step.resume,
        "attach",
        async () => {
          const patch = step.patch;
          const va = await kube.patch<VolumeAttachment>(
            volumeAttachments,
            step.name,
            undefined,
            patch,
            "strategic",
          );
          d.written.note(va);
          // The stored VA, as the write returned it: what is published follows its spec, never a copy's.
          if (!isDeepStrictEqual(va.spec, step.resume.va.spec))
            throw new TestFailedError(
              `VolumeAttachment ${step.name}: the spec decided on is not the stored one`,
            );
          return { ...step.resume, va };
        },
        run.carry,
        couldNotSaveAttachment,
      ),
    publish: (step, run) =>
      orFailure(
        step.resume,
        "attach",
        async () => {
          const response = await csi.controllerPublishVolume(step.request);
          const published = { ...step.published, publishContext: response.publishContext ?? {} };
          return withPublished(step.resume, published, step.forced);
        },
        run.carry,
      ),
    async "write-attached"(step, run) {
      const { uid, finalizer, publishContext } = step;
      // Gone (404): released and deleted by another sync while the publish was in flight.
      // First written on the VA the sync holds (no GET); a conflict reads it live.
      const r = await writeStatus(
        kube,
        step.name,
        (current) =>
          releasedMeanwhile(current, uid, finalizer)
            ? undefined
            : attachedStatus(current.status, publishContext),
        step.resume.va,
      ).catch(ignoreNotFound);
      d.written.note(r?.object);
      run.carry(withStatusWritten(step.resume, r?.object));
      return r?.written ? 1 : 0;
    },
    async "clear-backoff"(step) {
      const r = await updateObject<VolumeAttachment>(
        kube,
        volumeAttachments,
        { name: step.name },
        withoutBackoff,
      );
      return r.written ? 1 : 0;
    },
    async "take-back"(step, run) {
      // The VA that would make a sender retry is gone: retry here, on any error.
      try {
        await retrying(() => csi.controllerUnpublishVolume(step.request), {
          maxAttempts: d.maxAttempts,
          baseDelayMs: 200,
          retryable: () => true,
        });
      } catch (err) {
        throw new RetryLaterError(`${step.failure}: ${messageOf(err)}`, undefined, { cause: err });
      }
      run.carry(step.resume);
      return 0;
    },
    async "mark-attached"(step) {
      const r = await writeStatus(kube, step.name, (current) => attachedStatus(current.status, undefined));
      d.written.note(r.object);
      return r.written ? 1 : 0;
    },
    unpublish: (step, run) =>
      orFailure(
        step.resume,
        "detach",
        async () => {
          await csi.controllerUnpublishVolume(step.request);
          return step.resume;
        },
        run.carry,
      ),
    async "release-attachment"(step) {
      const patch = step.patch;
      const r = await kube
        .patch<VolumeAttachment>(volumeAttachments, step.name, undefined, patch, "merge")
        .catch(ignoreNotFound);
      return r ? 1 : 0;
    },
    async "write-detached"(step) {
      // Upstream markAsDetached: once the finalizer is gone the VA may be gone too.
      const r = await writeStatus(kube, step.name, (current) => detachedStatus(current.status)).catch(
        ignoreNotFound,
      );
      return r?.written ? 1 : 0;
    },
    async "sync-volume"(step, run) {
      const report = await d.syncVolume(step.name);
      run.carry(withVolumeSynced(step.resume, step.detached, step.name, report.outcome));
      return 0;
    },
    async "save-backoff"(step, run) {
      let delaySeconds: number | undefined;
      try {
        await updateObject<VolumeAttachment>(kube, volumeAttachments, { name: step.name }, (current) => {
          const next = withFailure(current, step.operation, step.now, d.retryInterval);
          delaySeconds = next.delaySeconds;
          return next.va;
        });
        run.carry(withFailureProgress(step.resume, { delaySeconds }));
        return 1;
      } catch (err) {
        // Like upstream: the operation's error is what gets reported; the failed save only adds to it.
        run.carry(withFailureProgress(step.resume, { delaySeconds, saveError: messageOf(err) }));
        return 0;
      }
    },
    async "save-error"(step, run) {
      const { error } = step;
      try {
        await writeStatus(kube, step.name, (current) =>
          step.operation === "attach"
            ? withAttachError(current.status, error)
            : withDetachError(current.status, error),
        );
        run.carry(step.resume);
        return 1;
      } catch (err) {
        run.carry(withFailureProgress(step.resume, { saveError: messageOf(err) }));
        return 0;
      }
    },
    async "retry-later"(step) {
      throw new RetryLaterError(step.message, step.delaySeconds, { cause: step.cause });
    },
    async "remove-volume-finalizer"(step) {
      await patchVolume(kube, step.name, step.patch);
      return 1;
    },
  };
}
