// Kubernetes resource.Quantity parsing, exact: values are kept as integer
// milli-units (BigInt) so "1.5Gi", "1500M" and "100m" compare without float
// error. Storage sizes are compared and converted with these.

const binarySuffixes: Record<string, bigint> = {
  Ki: 1n << 10n,
  Mi: 1n << 20n,
  Gi: 1n << 30n,
  Ti: 1n << 40n,
  Pi: 1n << 50n,
  Ei: 1n << 60n,
};

const decimalExponents: Record<string, number> = {
  n: -9,
  u: -6,
  m: -3,
  "": 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};

const pattern = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$/;

export class QuantityError extends Error {}

function pow10(n: number): bigint {
  return 10n ** BigInt(n);
}

// A volume search compares every PV's capacity with the claim's request, and
// a cluster uses few distinct sizes: parsed values are remembered (bounded,
// forgotten all at once when full; failures are not remembered).
const parsedMilli = new Map<string, bigint>();
const PARSED_MILLI_LIMIT = 4096;

/** The quantity in milli-units, rounded up (towards +infinity) below a milli-unit, as Kubernetes rounds. */
export function parseQuantityMilli(text: string): bigint {
  const known = parsedMilli.get(text);
  if (known !== undefined) return known;
  const milli = parseQuantityMilliUncached(text);
  if (parsedMilli.size >= PARSED_MILLI_LIMIT) parsedMilli.clear();
  parsedMilli.set(text, milli);
  return milli;
}

function parseQuantityMilliUncached(text: string): bigint {
  const m = pattern.exec(text.trim());
  if (!m)
    throw new QuantityError(
      `quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': "${text}"`,
    );
  const [, sign, number, suffix, exponent] = m;
  const [whole = "0", fraction = ""] = (number ?? "0").split(".");
  // value = digits / 10^fraction.length
  const digits = BigInt((whole || "0") + fraction);
  let numerator = digits * 1000n;
  let denominator = pow10(fraction.length);
  if (suffix && suffix in binarySuffixes) {
    numerator *= binarySuffixes[suffix]!;
  } else {
    const exp =
      suffix !== undefined ? (decimalExponents[suffix] ?? 0) : exponent !== undefined ? Number(exponent) : 0;
    if (exp >= 0) numerator *= pow10(exp);
    else denominator *= pow10(-exp);
  }
  let milli = numerator / denominator;
  if (numerator % denominator !== 0n) milli += 1n;
  return sign === "-" ? -milli : milli;
}

/** Bytes (whole units), rounded up. */
export function parseQuantityBytes(text: string): bigint {
  const milli = parseQuantityMilli(text);
  return milli >= 0n ? (milli + 999n) / 1000n : -((-milli + 999n) / 1000n);
}

export function compareQuantities(a: string, b: string): -1 | 0 | 1 {
  const x = parseQuantityMilli(a);
  const y = parseQuantityMilli(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

export function isValidQuantity(text: string): boolean {
  return pattern.test(text.trim());
}

/** A byte count written the way Kubernetes prints storage: the largest exact binary suffix, else plain bytes. */
export function formatBytes(bytes: bigint): string {
  if (bytes === 0n) return "0";
  for (const suffix of ["Ei", "Pi", "Ti", "Gi", "Mi", "Ki"]) {
    const unit = binarySuffixes[suffix]!;
    if (bytes % unit === 0n) return `${bytes / unit}${suffix}`;
  }
  return bytes.toString();
}
