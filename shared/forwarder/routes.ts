// FORWARDER_ROUTES: which function URL gets which kinds.
//
//   http://127.0.0.1:8081=PersistentVolumeClaim,PersistentVolume;http://127.0.0.1:8082=Pod,Node
//
// Routes are separated by ";" (or newlines, so a YAML block scalar works),
// the URL from its kinds by the last "=" (query strings may contain "=",
// kind names never do). "*" stands for every watchable kind. The same URL
// named twice gets the union of its kinds and one delivery queue, so it is
// never sent the same change twice.

import { WATCHABLE_KINDS } from "./watched-kinds.ts";

export interface Route {
  /** http(s) URL the CloudEvents are POSTed to. */
  url: string;
  /** Kind names, e.g. "PersistentVolumeClaim". */
  kinds: string[];
}

export class RouteConfigError extends Error {
  override name = "RouteConfigError";
}

const ALL_KINDS = "*";

export function parseRoutes(text: string): Route[] {
  const entries = text
    .split(/[;\n]/)
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  if (entries.length === 0) {
    throw new RouteConfigError(
      "no routes: set FORWARDER_ROUTES to <url>=<Kind>,<Kind>;<url>=<Kind>,... " +
        `(kinds: ${[...WATCHABLE_KINDS.keys()].join(", ")}, or *)`,
    );
  }
  const routes = entries.map((entry) => {
    const eq = entry.lastIndexOf("=");
    if (eq <= 0)
      throw new RouteConfigError(`route ${JSON.stringify(entry)} must look like <url>=<Kind>,<Kind>`);
    return { url: entry.slice(0, eq).trim(), kinds: entry.slice(eq + 1).split(",") };
  });
  return normalizeRoutes(routes);
}

/** Checks URLs and kinds, expands "*", and merges routes to the same URL. */
export function normalizeRoutes(routes: readonly Route[]): Route[] {
  const byUrl = new Map<string, Set<string>>();
  for (const route of routes) {
    const url = checkUrl(route.url);
    const kinds = byUrl.get(url) ?? new Set<string>();
    byUrl.set(url, kinds);
    for (const raw of route.kinds) {
      const kind = raw.trim();
      if (kind === "") continue;
      if (kind === ALL_KINDS) {
        for (const k of WATCHABLE_KINDS.keys()) kinds.add(k);
        continue;
      }
      if (!WATCHABLE_KINDS.has(kind)) {
        throw new RouteConfigError(
          `route ${redactUrl(url)}: unknown kind ${JSON.stringify(kind)}; the forwarder watches ${[...WATCHABLE_KINDS.keys()].join(", ")}`,
        );
      }
      kinds.add(kind);
    }
    if (kinds.size === 0) throw new RouteConfigError(`route ${redactUrl(url)} names no kinds`);
  }
  return [...byUrl].map(([url, kinds]) => ({ url, kinds: [...kinds] }));
}

function checkUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new RouteConfigError(`route URL ${JSON.stringify(raw)} is not a valid URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new RouteConfigError(`route URL ${redactUrl(raw)} must be http or https`);
  }
  return url.toString();
}

/**
 * A URL as logs and metric labels show it: no user info, no query (some
 * platforms put access keys there, e.g. Azure Functions' ?code=).
 */
export function redactUrl(raw: string): string {
  try {
    const url = new URL(raw);
    return `${url.protocol}//${url.host}${url.pathname}`;
  } catch {
    return "<invalid url>";
  }
}
