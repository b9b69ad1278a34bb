// Strict parsers for numbers and switches in the environment, shared by every
// entry point (functions, forwarder, Lambda). Strict on purpose: a typo in a
// setting must stop the process at start with a message naming the variable
// and what it held, not run with a silently different value. Unset or blank
// means "use the fallback".

/** process.env or a test's plain object. */
export type Env = Readonly<Record<string, string | undefined>>;

/** The trimmed value, or undefined when unset or blank (environment values often carry a newline). */
function setting(env: Env, key: string): string | undefined {
  const raw = env[key]?.trim();
  return raw === undefined || raw === "" ? undefined : raw;
}

/** An inclusive range an integer setting must fall in. */
export interface IntegerRange {
  min: number;
  max: number;
}

/**
 * A whole number in decimal (a sign allowed), or the fallback when unset.
 * With a range, values outside it are refused and the message names the range.
 */
export function integerFromEnv(env: Env, key: string, fallback: number, range?: IntegerRange): number {
  const raw = setting(env, key);
  if (raw === undefined) return fallback;
  // `+ 0` turns "-0" into 0, so a range starting at 0 does not let a negative zero through.
  const value = Number(raw) + 0;
  const integer = /^-?\d+$/.test(raw) && Number.isSafeInteger(value);
  if (range === undefined) {
    if (!integer) throw new Error(`${key} must be an integer, got ${JSON.stringify(raw)}`);
  } else if (!integer || value < range.min || value > range.max) {
    throw new Error(
      `${key} must be an integer from ${range.min} to ${range.max}, got ${JSON.stringify(raw)}`,
    );
  }
  return value;
}

/** A whole number above zero (timeouts, sizes), or the fallback when unset. */
export function positiveIntegerFromEnv(env: Env, key: string, fallback: number): number {
  const raw = setting(env, key);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value <= 0)
    throw new Error(`${key} must be a positive integer, got ${JSON.stringify(raw)}`);
  return value;
}

/** true/1 or false/0 in any case, or the fallback when unset; anything else ("yes", "on") is refused. */
export function booleanFromEnv(env: Env, key: string, fallback: boolean): boolean {
  const raw = setting(env, key);
  if (raw === undefined) return fallback;
  const lower = raw.toLowerCase();
  if (lower === "true" || lower === "1") return true;
  if (lower === "false" || lower === "0") return false;
  throw new Error(`${key} must be true or false, got ${JSON.stringify(raw)}`);
}

/** A CSI driver name as CSIDriver and StorageClass.provisioner accept it. */
const DRIVER_NAME = /^[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$/;

/** A comma-separated list of CSI driver names (blanks skipped); a malformed name stops the process. */
export function driverNamesFromEnv(env: Env, key: string): Set<string> {
  const names = (env[key] ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  for (const name of names) {
    if (!DRIVER_NAME.test(name))
      throw new Error(`${key}: ${JSON.stringify(name)} is not a valid provisioner (CSI driver) name`);
  }
  return new Set(names);
}
