// API conventions say resourceVersion is opaque: clients may only test it for
// equality. Every etcd-backed apiserver (and the sandbox) hands out decimal
// integers from one global, increasing revision, so ordering them is useful for
// telling a stale event from a fresh one. We only order when both look like
// that; anything else is "can't tell", never a guess.

const DECIMAL = /^[0-9]+$/;

function asRevision(rv: string | undefined | null): bigint | undefined {
  if (typeof rv !== "string" || !DECIMAL.test(rv)) return undefined;
  // BigInt: etcd revisions are int64, beyond Number's exact range.
  return BigInt(rv);
}

/** -1 if a is older than b, 1 if newer, 0 if equal, undefined when either is not a plain decimal. */
export function compareResourceVersions(
  a: string | undefined | null,
  b: string | undefined | null,
): -1 | 0 | 1 | undefined {
  const x = asRevision(a);
  const y = asRevision(b);
  if (x === undefined || y === undefined) return undefined;
  return x < y ? -1 : x > y ? 1 : 0;
}
