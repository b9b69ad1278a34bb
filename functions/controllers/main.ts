// `FUNCTION=controllers`: several controller functions in one process, as
// kube-controller-manager hosts its controllers. Each change is delivered
// once and handed to every controller in memory, where separate functions
// take one delivery each (a provisioned claim makes 17 deliveries to four
// functions, 5 to this one). CONTROLLERS names the hosted ones (default every
// controller function); each is built from the same environment as when it
// runs alone, with its own API client, but the watched copies two of them
// would each keep (PVs, StorageClasses) are kept once. The price is one
// ServiceAccount with the union of their permissions and one unit of scaling.
import type { Env } from "../../shared/config.ts";
import { hostControllers } from "../../shared/http/combined-controller.ts";
import { createControllerFunction } from "../../shared/http/controller-function.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { build as attachDetach } from "../attach-detach/main.ts";
import { build as attacher } from "../attacher/main.ts";
import { build as binder } from "../binder/main.ts";
import { type BuildContext, type BuiltFunction, serveBuilt } from "../built-function.ts";
import { build as protection } from "../protection/main.ts";
import { build as provisioner } from "../provisioner/main.ts";
import { build as resizer } from "../resizer/main.ts";
import { sharedCopies } from "./shared-copies.ts";

const BUILDERS: Readonly<Record<string, (env: Env, context: BuildContext) => Promise<BuiltFunction>>> = {
  binder,
  provisioner,
  attacher,
  "attach-detach": attachDetach,
  protection,
  resizer,
};

/** The controller functions one process may host, in the order they are built. */
export const HOSTABLE = Object.keys(BUILDERS);

/** CONTROLLERS: a comma-separated list of HOSTABLE names (default all); anything else stops the process. */
export function controllersFromEnv(env: Env): string[] {
  const raw = env.CONTROLLERS?.trim();
  if (!raw) return [...HOSTABLE];
  const names = raw.split(",").map((s) => s.trim());
  for (const name of names)
    if (!HOSTABLE.includes(name))
      throw new Error(
        `CONTROLLERS: ${JSON.stringify(name)} is not a controller function; expected some of ${HOSTABLE.join(", ")}`,
      );
  return HOSTABLE.filter((name) => names.includes(name));
}

export async function build(env: Env = process.env): Promise<BuiltFunction> {
  const names = controllersFromEnv(env);
  const logger = createLogger({ name: "controllers" });
  // The copies several controllers keep are kept once, read through an API client of the host's.
  const kubeConfig = loadKubeConfig(env);
  const kube = new KubeJsonClient(kubeConfig);
  const copies = sharedCopies({ kubeConfig, json: kube, log: logger });
  const parts: BuiltFunction[] = [];
  const closeAll = async (): Promise<void> => {
    await Promise.all(parts.map((p) => p.close()));
    await copies.stop();
    await kube.close();
  };
  try {
    for (const name of names)
      parts.push(await (BUILDERS[name] as (typeof BUILDERS)[string])(env, { copies }));
  } catch (err) {
    await closeAll();
    throw err;
  }
  const controller = hostControllers(
    Object.fromEntries(
      parts.map((p) => {
        if (!p.controller) throw new Error(`${p.name} built no controller`);
        return [p.name, p.controller];
      }),
    ),
  );
  const readiness = parts.flatMap((p) => (p.ready ? [p.ready] : []));
  const app = createControllerFunction({
    name: "controllers",
    controller,
    logger,
    ready: async () => (await Promise.all(readiness.map((ready) => ready()))).every(Boolean),
  });
  logger.info({ controllers: names }, "hosting");
  return {
    name: "controllers",
    app,
    controller,
    logger,
    close: closeAll,
  };
}

export async function main(): Promise<void> {
  await serveBuilt(await build());
}
