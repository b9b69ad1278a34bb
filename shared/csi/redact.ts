// Secrets in CSI messages must never reach a log line. In csi.proto every
// field marked (csi_secret) is a map named `secrets` (a test pins that down),
// so redaction replaces the values of every `secrets` map, at any depth.
// Keys stay visible: which credentials were passed is useful when debugging
// and is not itself a secret.

export const STRIPPED = "***stripped***";

/** Field names that carry (csi_secret) in csi.proto. */
export const SECRET_FIELDS: ReadonlySet<string> = new Set(["secrets"]);

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function redactValue(value: unknown, depth: number): unknown {
  if (depth > 32) return "[Truncated]";
  if (Array.isArray(value)) return value.map((item) => redactValue(item, depth + 1));
  if (!isPlainRecord(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (SECRET_FIELDS.has(key) && item !== null && item !== undefined) {
      out[key] = isPlainRecord(item)
        ? Object.fromEntries(Object.keys(item).map((k) => [k, STRIPPED]))
        : STRIPPED;
    } else {
      out[key] = redactValue(item, depth + 1);
    }
  }
  return out;
}

/** A copy of a CSI request (or response) that is safe to log; the input is not changed. */
export function redactSecrets<T>(message: T): T {
  return redactValue(message, 0) as T;
}
