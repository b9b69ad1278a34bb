// deploy/webhooks.yaml's webhook configurations, renamed and pointed at a URL,
// for the tools that register our admission function with a real cluster
// (scripts/real-cluster-admission.ts, the real-server bench); with
// `storagePluginsOff`, also the hooks deploy/components/no-storage-admission-plugins
// adds for a kube-apiserver that runs without its storage admission plugins.

import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { isRecord } from "../shared/is-record.ts";
import type { KubeObject } from "../shared/kube/types.ts";

const DEPLOY = join(resolve(fileURLToPath(new URL("..", import.meta.url))), "deploy");
const WEBHOOKS_YAML = join(DEPLOY, "webhooks.yaml");
const PLUGINS_OFF_COMPONENT = join(
  DEPLOY,
  "components",
  "no-storage-admission-plugins",
  "kustomization.yaml",
);

type Webhook = { name: string; clientConfig: { service?: { path?: string } } & Record<string, unknown> };

export type WebhookConfiguration = KubeObject & { webhooks: Webhook[] };

/** The webhooks the component appends, by configuration kind (its patches are `add /webhooks/-` operations). */
async function componentHooks(): Promise<Map<string, Webhook[]>> {
  const component = parseYaml(await readFile(PLUGINS_OFF_COMPONENT, "utf8")) as {
    patches?: { target?: { kind?: string }; patch?: string }[];
  };
  const out = new Map<string, Webhook[]>();
  for (const ref of component.patches ?? []) {
    const kind = ref.target?.kind ?? "";
    const ops: unknown = parseYaml(ref.patch ?? "");
    if (!Array.isArray(ops))
      throw new Error(`${PLUGINS_OFF_COMPONENT}: a patch that is not a list of operations`);
    for (const op of ops) {
      if (!isRecord(op) || op.op !== "add" || op.path !== "/webhooks/-" || !isRecord(op.value))
        throw new Error(`${PLUGINS_OFF_COMPONENT}: only \`add /webhooks/-\` operations are read here`);
      out.set(kind, [...(out.get(kind) ?? []), op.value as Webhook]);
    }
  }
  return out;
}

/** The two configurations, each named `name`, every hook pointed at `url` + its path with `caCert` as caBundle. */
export async function webhookConfigurations(
  name: string,
  url: string,
  caCert: string,
  options: { storagePluginsOff?: boolean } = {},
): Promise<WebhookConfiguration[]> {
  const text = await readFile(WEBHOOKS_YAML, "utf8");
  const configs = parseAllDocuments(text)
    .map((d) => d.toJS() as KubeObject)
    .filter((d) =>
      /^(Mutating|Validating)WebhookConfiguration$/.test(d.kind ?? ""),
    ) as WebhookConfiguration[];
  if (configs.length !== 2) throw new Error("deploy/webhooks.yaml: expected two webhook configurations");
  const added = options.storagePluginsOff ? await componentHooks() : new Map<string, Webhook[]>();
  return configs.map((config) => ({
    ...config,
    metadata: { name, labels: { "app.kubernetes.io/part-of": "kube-storage-functions" } },
    webhooks: [...config.webhooks, ...(added.get(config.kind ?? "") ?? [])].map((w) => ({
      ...w,
      clientConfig: {
        url: `${url}${w.clientConfig.service?.path ?? "/"}`,
        caBundle: Buffer.from(caCert).toString("base64"),
      },
    })),
  }));
}
