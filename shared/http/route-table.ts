// Which methods a path accepts, read from the express routers themselves so
// that 405 (with Allow) and 404 stay right when a function adds routes, and
// so metrics get the route pattern ("/explain/:name"), never the raw path,
// as their label (raw paths would make label cardinality unbounded).
//
// Relies on router@2 internals that express 5 uses: `router.stack` layers with
// `route.methods` and a side-effect-free `match(path)` returning `pattern`.
// Layers of another shape (plain middleware, nested routers) are skipped.

import type { Router } from "express";

interface RouteLayer {
  route: { methods: Record<string, boolean | undefined> };
  match(path: string): false | { pattern?: unknown };
}

function isRouteLayer(layer: unknown): layer is RouteLayer {
  if (typeof layer !== "object" || layer === null) return false;
  const candidate = layer as { route?: { methods?: unknown }; match?: unknown };
  return (
    typeof candidate.match === "function" &&
    typeof candidate.route === "object" &&
    candidate.route !== null &&
    typeof candidate.route.methods === "object" &&
    candidate.route.methods !== null
  );
}

export interface RouteMatch {
  /** The route pattern, for logs and metric labels. */
  pattern: string;
  /** Upper-case methods, HEAD included wherever GET is. */
  methods: Set<string>;
}

/** Looks `path` up in the routers' route layers; undefined when no route matches. */
export function matchRoute(routers: readonly Router[], path: string): RouteMatch | undefined {
  let found: RouteMatch | undefined;
  for (const router of routers) {
    const stack: readonly unknown[] = (router as { stack?: unknown[] }).stack ?? [];
    for (const layer of stack) {
      if (!isRouteLayer(layer)) continue;
      const match = layer.match(path);
      if (match === false) continue;
      found ??= { pattern: typeof match.pattern === "string" ? match.pattern : path, methods: new Set() };
      for (const [method, enabled] of Object.entries(layer.route.methods)) {
        if (!enabled) continue;
        if (method === "_all") return { pattern: found.pattern, methods: new Set(["*"]) };
        found.methods.add(method.toUpperCase());
      }
    }
  }
  if (found?.methods.has("GET")) found.methods.add("HEAD");
  return found;
}

export function allows(match: RouteMatch, method: string): boolean {
  return match.methods.has("*") || match.methods.has(method.toUpperCase());
}
