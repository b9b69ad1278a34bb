// The admission function: AdmissionReview admission.k8s.io/v1 at
//   POST /mutate/persistentvolumeclaims    default class, protection and provisioning finalizers, provisioner annotations
//   POST /validate/persistentvolumeclaims  immutable spec, no shrink, expansion rules
//   POST /mutate/persistentvolumes         protection finalizer
//   POST /validate/volumeattachments       immutable spec, one source, node set, attacher's CSIDriver exists
// plus /healthz, /readyz, /metrics from the shell. There is no event
// endpoint (POST / is a 404). A well-formed review is always answered 200;
// the verdict is in the body. A body that is not JSON is a 415, one that is
// not an AdmissionReview a 400, one over the limit a 413.
import type { NextFunction, Request, Response } from "express";
import type { AdmissionHook } from "../../shared/admission/hooks.ts";
import { parseAdmissionReview, reviewResponse } from "../../shared/admission/review.ts";
import { MAX_BODY_BYTES } from "../../shared/events/limits.ts";
import { isJsonMediaType } from "../../shared/events/media-type.ts";
import { BadRequestError } from "../../shared/http/errors.ts";
import {
  createFunctionApp,
  type FunctionApp,
  maxBodyBytesFromEnv,
  rawBody,
} from "../../shared/http/function-app.ts";
import type { Logger } from "../../shared/log.ts";
import { counter, processMetrics, type Registry } from "../../shared/metrics.ts";

export interface AdmissionAppOptions {
  hooks: readonly AdmissionHook[];
  logger?: Logger;
  metrics?: Registry;
  /** Defaults to MAX_BODY_BYTES, then 3 MiB: a review carries the object and, on UPDATE, the old one. */
  maxBodyBytes?: number;
}

/** MAX_BODY_BYTES when set; otherwise room for an object and its old version at etcd's 1.5 MiB limit. */
export function admissionBodyLimit(env: NodeJS.ProcessEnv = process.env): number {
  return env.MAX_BODY_BYTES?.trim() ? maxBodyBytesFromEnv(env) : MAX_BODY_BYTES;
}

/** 415 unless the body says it is JSON (kube-apiserver sends application/json). */
function requireJson(req: Request, _res: Response, next: NextFunction): void {
  const header = req.headers["content-type"];
  const mediaType = header?.split(";")[0]?.trim().toLowerCase() ?? "";
  if (!isJsonMediaType(mediaType)) {
    const got =
      header === undefined ? "no Content-Type" : `Content-Type ${JSON.stringify(header.slice(0, 100))}`;
    next(new BadRequestError(`an AdmissionReview must be sent as application/json; got ${got}`, 415));
    return;
  }
  next();
}

export function createAdmissionApp(options: AdmissionAppOptions): FunctionApp {
  const limit = options.maxBodyBytes ?? admissionBodyLimit();
  const metrics = options.metrics ?? processMetrics();
  const decisions = counter(metrics, {
    name: "admission_reviews_total",
    help: "AdmissionReviews answered, by webhook path and decision (allowed, patched, denied)",
    labelNames: ["path", "decision"] as const,
  });
  return createFunctionApp({
    name: "admission",
    // kube-apiserver sends no bearer token to webhooks; trust comes from TLS, so AUTH_MODE must not apply here.
    auth: null,
    ...(options.logger ? { logger: options.logger } : {}),
    metrics,
    maxBodyBytes: limit,
    routes(router, ctx) {
      for (const hook of options.hooks) {
        router.post(hook.path, requireJson, rawBody(limit), async (req: Request, res: Response) => {
          const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
          const request = parseAdmissionReview(body);
          const response = await hook.review(request);
          const decision = !response.allowed ? "denied" : response.patch ? "patched" : "allowed";
          decisions.inc({ path: hook.path, decision });
          ctx().log.debug(
            {
              uid: request.uid,
              operation: request.operation,
              object: `${request.namespace ? `${request.namespace}/` : ""}${request.name}`,
              dryRun: request.dryRun,
              decision,
              ...(response.status ? { denial: response.status.message } : {}),
              ...(response.warnings ? { warnings: response.warnings } : {}),
            },
            "admission review",
          );
          if (!res.destroyed) res.status(200).json(reviewResponse(response));
        });
      }
    },
  });
}
