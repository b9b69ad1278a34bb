// deploy/webhooks.yaml's webhook configurations, renamed and pointed at a URL,
// for the tools that register our admission function with a real cluster
// (scripts/real-cluster-admission.ts, the real-server bench); on request also
// the hooks an opt-in component adds: deploy/components/no-storage-admission-plugins
// (for a kube-apiserver without its storage admission plugins) and
// deploy/components/attachment-driver-check.

import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { isRecord } from "../shared/is-record.ts";
import type { KubeObject } from "../shared/kube/types.ts";

const DEPLOY = join(resolve(fileURLToPath(new URL("..", import.meta.url))), "deploy");
const WEBHOOKS_YAML = join(DEPLOY, "webhooks.yaml");
const componentFile = (name: string): string => join(DEPLOY, "components", name, "kustomization.yaml");

type Webhook = {
  name: string;
  clientConfig: { service?: { path?: string } } & Record<string, unknown>;
  failurePolicy?: string;
};

export type WebhookConfiguration = KubeObject & { webhooks: Webhook[] };

/** The webhooks a component appends, by configuration kind (its patches are `add /webhooks/-` operations). */
async function componentHooks(name: string, out: Map<string, Webhook[]>): Promise<void> {
  const file = componentFile(name);
  const component = parseYaml(await readFile(file, "utf8")) as {
    patches?: { target?: { kind?: string }; patch?: string }[];
  };
  for (const ref of component.patches ?? []) {
    const kind = ref.target?.kind ?? "";
    const ops: unknown = parseYaml(ref.patch ?? "");
    if (!Array.isArray(ops)) throw new Error(`${file}: a patch that is not a list of operations`);
    for (const op of ops) {
      if (!isRecord(op) || op.op !== "add" || op.path !== "/webhooks/-" || !isRecord(op.value))
        throw new Error(`${file}: only \`add /webhooks/-\` operations are read here`);
      out.set(kind, [...(out.get(kind) ?? []), op.value as Webhook]);
    }
  }
}

export interface OptInHooks {
  /** deploy/components/no-storage-admission-plugins: the PV CREATE and claim UPDATE hooks. */
  storagePluginsOff?: boolean;
  /** deploy/components/attachment-driver-check: the VolumeAttachment CREATE hook. */
  attachmentDriverCheck?: boolean;
}

/** The two configurations, each named `name`, every hook pointed at `url` + its path with `caCert` as caBundle. */
export async function webhookConfigurations(
  name: string,
  url: string,
  caCert: string,
  options: OptInHooks = {},
): Promise<WebhookConfiguration[]> {
  const text = await readFile(WEBHOOKS_YAML, "utf8");
  const configs = parseAllDocuments(text)
    .map((d) => d.toJS() as KubeObject)
    .filter((d) =>
      /^(Mutating|Validating)WebhookConfiguration$/.test(d.kind ?? ""),
    ) as WebhookConfiguration[];
  if (configs.length !== 2) throw new Error("deploy/webhooks.yaml: expected two webhook configurations");
  const added = new Map<string, Webhook[]>();
  if (options.storagePluginsOff) await componentHooks("no-storage-admission-plugins", added);
  if (options.attachmentDriverCheck) await componentHooks("attachment-driver-check", added);
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
