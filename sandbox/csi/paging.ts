// ListVolumes / ListSnapshots pagination. The token names the last entry
// returned rather than an offset, so deleting entries between two pages
// neither skips nor repeats the others. A token we did not hand out is
// ABORTED, as the spec asks.
import { CsiError, invalidArgument } from "./errors.ts";

const prefix = "after:";

export interface Page<T> {
  items: T[];
  nextToken: string;
}

/** The paging fields of ListVolumes and ListSnapshots requests. */
export interface PageRequest {
  maxEntries?: number;
  startingToken?: string;
}

export function paginate<T>(
  method: string,
  items: readonly T[],
  keyOf: (item: T) => string,
  { maxEntries = 0, startingToken = "" }: PageRequest,
): Page<T> {
  if (maxEntries < 0) throw invalidArgument(`${method}: max_entries must not be negative`);
  const sorted = [...items].sort((a, b) => compare(keyOf(a), keyOf(b)));
  let start = 0;
  if (startingToken) {
    const after = decodeToken(startingToken);
    if (after === undefined) {
      throw new CsiError(
        "ABORTED",
        `${method}: starting_token ${JSON.stringify(startingToken)} is not valid`,
      );
    }
    start = sorted.findIndex((item) => compare(keyOf(item), after) > 0);
    if (start < 0) start = sorted.length;
  }
  const end = maxEntries > 0 ? Math.min(sorted.length, start + maxEntries) : sorted.length;
  const page = sorted.slice(start, end);
  const nextToken = end < sorted.length && page.length > 0 ? encodeToken(keyOf(page[page.length - 1]!)) : "";
  return { items: page, nextToken };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function encodeToken(key: string): string {
  return prefix + Buffer.from(key, "utf8").toString("base64url");
}

function decodeToken(token: string): string | undefined {
  if (!token.startsWith(prefix)) return undefined;
  const body = token.slice(prefix.length);
  if (!/^[A-Za-z0-9_-]+$/.test(body)) return undefined;
  const key = Buffer.from(body, "base64url").toString("utf8");
  return encodeToken(key) === token ? key : undefined;
}
