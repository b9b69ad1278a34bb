// Reads a Secret named by a StorageClass or PV (provisioner, deleter and
// controller-publish secrets) as plain strings.
import { apiStatusOf, getOptional, statusCodeOf } from "./api-errors.ts";
import type { KubeJsonClient } from "./json-client.ts";
import { secrets } from "./resources.ts";
import type { Secret } from "./types.ts";

function decodeSecret(secret: Secret): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(secret.data ?? {})) out[k] = Buffer.from(v, "base64").toString("utf8");
  for (const [k, v] of Object.entries(secret.stringData ?? {})) out[k] = v;
  return out;
}

/**
 * The Secret's data, or the reason it cannot be had (absent, or our RBAC may
 * not read it) in upstream's words, for the caller's failure Event; other
 * errors (transient ones) are thrown for a retry.
 */
export async function readSecretData(
  kube: KubeJsonClient,
  ref: { name: string; namespace: string },
): Promise<{ ok: true; value: Record<string, string> } | { ok: false; error: string }> {
  let secret: Secret | undefined;
  try {
    secret = await getOptional(() => kube.get<Secret>(secrets, ref.name, ref.namespace));
  } catch (err) {
    // A refusal is configuration (a Secret outside the namespaces RBAC grants), not a fault to retry blindly.
    if (statusCodeOf(err) !== 403) throw err;
    const why = apiStatusOf(err)?.message ?? (err instanceof Error ? err.message : String(err));
    return { ok: false, error: `error getting secret ${ref.name} in namespace ${ref.namespace}: ${why}` };
  }
  if (!secret) {
    return {
      ok: false,
      error: `error getting secret ${ref.name} in namespace ${ref.namespace}: secrets "${ref.name}" not found`,
    };
  }
  return { ok: true, value: decodeSecret(secret) };
}
