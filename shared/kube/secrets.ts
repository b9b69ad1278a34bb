// Reads a Secret named by a StorageClass or PV (provisioner, deleter and
// controller-publish secrets) as plain strings.
import { getOptional } from "./api-errors.ts";
import type { KubeJsonClient } from "./json-client.ts";
import { secrets } from "./resources.ts";
import type { Secret } from "./types.ts";

function decodeSecret(secret: Secret): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(secret.data ?? {})) out[k] = Buffer.from(v, "base64").toString("utf8");
  for (const [k, v] of Object.entries(secret.stringData ?? {})) out[k] = v;
  return out;
}

export async function readSecretData(
  kube: KubeJsonClient,
  ref: { name: string; namespace: string },
): Promise<{ ok: true; value: Record<string, string> } | { ok: false; error: string }> {
  const secret = await getOptional(() => kube.get<Secret>(secrets, ref.name, ref.namespace));
  if (!secret) {
    return {
      ok: false,
      error: `error getting secret ${ref.name} in namespace ${ref.namespace}: secrets "${ref.name}" not found`,
    };
  }
  return { ok: true, value: decodeSecret(secret) };
}
