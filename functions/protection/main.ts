// Entry of the protection function: `FUNCTION=protection npm run serve`, or
// the container command. Configuration: KUBECONFIG, PORT, LOG_LEVEL, WORKERS,
// KUBE_API_QPS, KUBE_API_BURST.
import { controllerKnobsFromEnv } from "../../shared/config.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { ProtectionController } from "../../shared/protection/runtime/protection-controller.ts";
import { type BuiltFunction, serveBuilt } from "../built-function.ts";
import { createProtectionApp } from "./app.ts";

/** The protection function from the environment, not yet serving (lambda.ts serves its app too). */
export async function build(env = process.env): Promise<BuiltFunction> {
  // kube-controller-manager's protection controllers have no worker flag: no cap unless WORKERS says one.
  const knobs = controllerKnobsFromEnv(env);
  const logger = createLogger({ name: "protection" });
  const kube = new KubeJsonClient(loadKubeConfig(env), { rate: knobs.kubeApiRate });
  const controller = new ProtectionController({ kube, workers: knobs.workers });
  const app = createProtectionApp({ controller, logger });
  return { name: "protection", app, controller, logger, close: () => kube.close() };
}

export async function main(): Promise<void> {
  await serveBuilt(await build());
}
