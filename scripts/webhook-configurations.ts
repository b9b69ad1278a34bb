// deploy/webhooks.yaml's webhook configurations, renamed and pointed at a URL,
// for the tools that register our admission function with a real cluster
// (scripts/real-cluster-admission.ts, the real-server bench).

import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import type { KubeObject } from "../shared/kube/types.ts";

const WEBHOOKS_YAML = join(resolve(fileURLToPath(new URL("..", import.meta.url))), "deploy", "webhooks.yaml");

export type WebhookConfiguration = KubeObject & {
  webhooks: { name: string; clientConfig: { service?: { path?: string } } & Record<string, unknown> }[];
};

/** The two configurations, each named `name`, every hook pointed at `url` + its path with `caCert` as caBundle. */
export async function webhookConfigurations(
  name: string,
  url: string,
  caCert: string,
): Promise<WebhookConfiguration[]> {
  const text = await readFile(WEBHOOKS_YAML, "utf8");
  const configs = parseAllDocuments(text)
    .map((d) => d.toJS() as KubeObject)
    .filter((d) =>
      /^(Mutating|Validating)WebhookConfiguration$/.test(d.kind ?? ""),
    ) as WebhookConfiguration[];
  if (configs.length !== 2) throw new Error("deploy/webhooks.yaml: expected two webhook configurations");
  return configs.map((config) => ({
    ...config,
    metadata: { name, labels: { "app.kubernetes.io/part-of": "kube-storage-functions" } },
    webhooks: config.webhooks.map((w) => ({
      ...w,
      clientConfig: {
        url: `${url}${w.clientConfig.service?.path ?? "/"}`,
        caBundle: Buffer.from(caCert).toString("base64"),
      },
    })),
  }));
}
