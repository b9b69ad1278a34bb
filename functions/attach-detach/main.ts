// Entry of the attach/detach function: `FUNCTION=attach-detach npm run serve`,
// or the container command. Configuration: KUBECONFIG, PORT, LOG_LEVEL,
// ATTACH_DETACH_MAX_WAIT_FOR_UNMOUNT_SECONDS, DISABLE_FORCE_DETACH_ON_TIMEOUT,
// WORKERS, KUBE_API_QPS, KUBE_API_BURST.

import { eventSource } from "../../shared/attach-detach/constants.ts";
import { type DetachPolicy, defaultDetachPolicy } from "../../shared/attach-detach/detach-policy.ts";
import { AttachDetachController } from "../../shared/attach-detach/runtime/attach-detach-controller.ts";
import { booleanFromEnv, controllerKnobsFromEnv, type Env, integerFromEnv } from "../../shared/config.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { type BuiltFunction, serveBuilt } from "../built-function.ts";
import { createAttachDetachApp } from "./app.ts";

/** A year: anything longer is a typo, not a policy. */
const maxWaitLimitSeconds = 365 * 24 * 3600;

/**
 * maxWaitForUnmountDuration (seconds, default 360) and kube-controller-manager's
 * --disable-force-detach-on-timeout; a bad value stops the process at start.
 */
export function detachPolicyFromEnv(env: Env = process.env): DetachPolicy {
  const seconds = integerFromEnv(
    env,
    "ATTACH_DETACH_MAX_WAIT_FOR_UNMOUNT_SECONDS",
    defaultDetachPolicy.maxWaitForUnmountMs / 1000,
    { min: 0, max: maxWaitLimitSeconds },
  );
  return {
    maxWaitForUnmountMs: seconds * 1000,
    disableForceDetachOnTimeout: booleanFromEnv(
      env,
      "DISABLE_FORCE_DETACH_ON_TIMEOUT",
      defaultDetachPolicy.disableForceDetachOnTimeout,
    ),
  };
}

/** The attach/detach function from the environment, not yet serving (lambda.ts serves its app too). */
export async function build(env = process.env): Promise<BuiltFunction> {
  const policy = detachPolicyFromEnv(env);
  // kube-controller-manager's attach/detach loop has no worker flag: no cap unless WORKERS says one.
  const knobs = controllerKnobsFromEnv(env);
  const logger = createLogger({ name: "attach-detach" });
  const kube = new KubeJsonClient(loadKubeConfig(env), { rate: knobs.kubeApiRate });
  const events = new EventRecorder(kube, {
    component: eventSource,
    logger: { warn: (details, message) => logger.warn(details, message) },
  });
  const controller = new AttachDetachController({
    kube,
    events,
    policy,
    workers: knobs.workers,
    log: { info: (details, message) => logger.info(details, message) },
  });
  const app = createAttachDetachApp({ controller, logger });
  return { name: "attach-detach", app, controller, logger, close: () => kube.close() };
}

export async function main(): Promise<void> {
  await serveBuilt(await build());
}
