// The AWS Lambda adapter every functions/<name>/lambda.ts uses: the same
// express app the container serves, built once per cold start and wrapped by
// serverless-http, so a Lambda function URL (API Gateway v2 payload) event is
// one HTTP request to the app and its answer is the Lambda result.
//
// Two things exist only on Lambda, and are handled here:
//  - Credentials: a Lambda has no kubeconfig file and no service account.
//    At cold start the bearer token and the kubeconfig are read from SSM
//    Parameter Store or Secrets Manager (lambda-credentials.ts) into
//    AUTH_TOKEN and KUBECONFIG_DATA; KUBECONFIG_DATA (the kubeconfig's YAML,
//    or its base64) is written to a private file under /tmp and KUBECONFIG
//    pointed at it before the app is built. A KUBECONFIG that is already set
//    wins over a KUBECONFIG_DATA from the environment (e.g. a file in a
//    layer), not over one read from a store. Fail closed: until both can be
//    read every invocation is a 503 naming what is missing, and nothing runs.
//  - Periodic resync: an EventBridge schedule (serverless.yml `schedule`)
//    invokes the function directly, not through its URL, so the adapter turns
//    that invocation into `POST /resync`. Lambda has already authorized the
//    invoker (IAM), so the adapter presents the function's own AUTH_TOKEN for
//    it when AUTH_MODE=token.

import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import serverlessHttp from "serverless-http";
import { staticTokenFromEnv } from "../shared/http/auth.ts";
import { classifyError, RetryLaterError } from "../shared/http/errors.ts";
import { createLogger } from "../shared/log.ts";
import type { BuiltFunction } from "./built-function.ts";
import { LambdaCredentialsError, loadLambdaCredentials } from "./lambda-credentials.ts";

/** The fields of an API Gateway v2 / function URL event the adapter reads or makes. */
export interface FunctionUrlEvent {
  version: "2.0";
  routeKey: string;
  rawPath: string;
  rawQueryString: string;
  headers: Record<string, string>;
  requestContext: {
    http: { method: string; path: string; protocol: string; sourceIp: string; userAgent: string };
    requestId: string;
    [key: string]: unknown;
  };
  body?: string;
  isBase64Encoded: boolean;
  [key: string]: unknown;
}

/** What Lambda gets back for a function URL: status, headers, body. */
export interface FunctionUrlResult {
  statusCode: number;
  headers?: Record<string, string | number | boolean>;
  body?: string;
  isBase64Encoded?: boolean;
  cookies?: string[];
}

export type LambdaHandler = (event: unknown, context?: object) => Promise<FunctionUrlResult>;

type Wrapped = (event: object, context: object) => Promise<object>;

/** An EventBridge scheduled invocation (serverless.yml `schedule` events). */
function isScheduledEvent(event: unknown): event is { id?: string; time?: string } {
  if (typeof event !== "object" || event === null) return false;
  const e = event as Record<string, unknown>;
  return e.source === "aws.events" && e["detail-type"] === "Scheduled Event";
}

/** `POST /resync` as a function URL event, standing in for a scheduled invocation. */
function resyncRequest(scheduled: { id?: string }, env: NodeJS.ProcessEnv): FunctionUrlEvent {
  const id = scheduled.id ?? "scheduled-resync";
  const token = staticTokenFromEnv(env);
  return {
    version: "2.0",
    routeKey: "$default",
    rawPath: "/resync",
    rawQueryString: "",
    headers: {
      "content-type": "application/json",
      "x-request-id": id,
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    requestContext: {
      http: {
        method: "POST",
        path: "/resync",
        protocol: "HTTP/1.1",
        sourceIp: "127.0.0.1",
        userAgent: "eventbridge",
      },
      requestId: id,
    },
    body: "{}",
    isBase64Encoded: false,
  };
}

/**
 * KUBECONFIG_DATA to a 0600 file, and KUBECONFIG to its path, unless
 * KUBECONFIG is set already. Base64 is accepted because Lambda console and
 * CI secret stores mangle multi-line values.
 */
function materializeKubeconfig(env: NodeJS.ProcessEnv, fromStore: boolean): void {
  const data = env.KUBECONFIG_DATA?.trim();
  if (!data || (env.KUBECONFIG?.trim() && !fromStore)) return;
  const yaml = /^[A-Za-z0-9+/=\s]+$/.test(data) ? Buffer.from(data, "base64").toString("utf8") : data;
  const dir = mkdtempSync(join(tmpdir(), "kubeconfig-"));
  const file = join(dir, "config");
  writeFileSync(file, yaml, { mode: 0o600 });
  env.KUBECONFIG = file;
}

function unavailable(name: string, err: unknown): FunctionUrlResult {
  createLogger({ name }).error({ err }, "function failed to start; answering 503 until a build succeeds");
  // The app's own answer to a RetryLaterError; senders (and the forwarder) retry a 503 after Retry-After.
  // A credentials failure says which, in words that name settings and stores only (the URL is public).
  const why = err instanceof LambdaCredentialsError ? `: ${err.publicMessage}` : "";
  const answer = classifyError(
    new RetryLaterError(`${name} is starting or misconfigured${why}; retry later`, 5),
  );
  return {
    statusCode: answer.status,
    headers: {
      "content-type": "application/json; charset=utf-8",
      "retry-after": String(answer.retryAfterSeconds),
    },
    body: JSON.stringify(answer.body),
  };
}

/**
 * A Lambda handler serving the app of a function's `build()`. It is built on
 * the first invocation of each cold start and reused; a failed build is
 * retried on the next invocation instead of pinning the instance to the error.
 */
export function lambdaHandler(name: string, build: () => Promise<BuiltFunction>): LambdaHandler {
  let wrapped: Promise<Wrapped> | undefined;
  return async (event, context = {}) => {
    if (wrapped === undefined) {
      wrapped = (async () => {
        const { loaded } = await loadLambdaCredentials(process.env);
        materializeKubeconfig(process.env, loaded.includes("KUBECONFIG_DATA"));
        const { app } = await build();
        return serverlessHttp(app, { provider: "aws" }) as Wrapped;
      })();
      wrapped.catch(() => {
        wrapped = undefined;
      });
    }
    let handle: Wrapped;
    try {
      handle = await wrapped;
    } catch (err) {
      return unavailable(name, err);
    }
    const request = isScheduledEvent(event) ? resyncRequest(event, process.env) : event;
    if (typeof request !== "object" || request === null) {
      return { statusCode: 400, body: JSON.stringify({ error: "not a function URL event" }) };
    }
    return (await handle(request, context)) as FunctionUrlResult;
  };
}
