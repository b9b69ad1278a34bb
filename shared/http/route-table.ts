// The routes a function serves, recorded as they are added, so that 405 (with
// Allow) and 404 stay right when a function adds routes, and metrics get the
// route pattern ("/explain/:name") as their label, never the raw path (raw
// paths would make label cardinality unbounded). Express itself matches each
// request against the recorded patterns (a route per pattern on a router of
// our own), so a path matches here exactly when express would route it.

import type { NextFunction, Request, Response, Router } from "express";
import express from "express";

const ROUTE_METHODS = ["get", "post", "put", "patch", "delete"] as const;
type RouteMethod = (typeof ROUTE_METHODS)[number];

/** How a function adds routes: express's route methods, each recorded in the table. */
export type FunctionRoutes = Pick<Router, RouteMethod>;

interface RouteMatch {
  /** The route pattern, for logs and metric labels. */
  pattern: string;
  /** Upper-case methods, HEAD included wherever GET is. */
  methods: ReadonlySet<string>;
}

export class RouteTable {
  /** Upper-case methods by pattern, in the order the patterns were first added. */
  readonly #methods = new Map<string, Set<string>>();
  readonly #matches = new WeakMap<Request, { pattern: string; methods: Set<string> }>();
  /** One catch-all route per pattern; its handler notes the match and passes the request on. */
  readonly matcher: Router = express.Router();

  /** A view of `router` whose route methods record each route here before adding it there. */
  recorder(router: Router): FunctionRoutes {
    const view: Partial<Record<RouteMethod, unknown>> = {};
    for (const method of ROUTE_METHODS) {
      view[method] = (path: unknown, ...handlers: unknown[]) => {
        this.add(method, path);
        return (router[method] as (...args: unknown[]) => Router)(path, ...handlers);
      };
    }
    return view as FunctionRoutes;
  }

  /** Records that `pattern` answers `method`. Patterns are strings: they become metric labels. */
  add(method: RouteMethod, pattern: unknown): void {
    if (typeof pattern !== "string" || !pattern.startsWith("/"))
      throw new TypeError(`a function route is a path pattern starting with "/", got ${String(pattern)}`);
    let methods = this.#methods.get(pattern);
    if (methods === undefined) {
      const known = new Set<string>();
      methods = known;
      this.#methods.set(pattern, known);
      this.matcher.all(pattern, (req: Request, _res: Response, next: NextFunction) => {
        this.#note(req, pattern, known);
        next();
      });
    }
    methods.add(method.toUpperCase());
    if (method === "get") methods.add("HEAD");
  }

  /** The first matching pattern with the methods of every matching one, as the matcher saw this request. */
  matchOf(req: Request): RouteMatch | undefined {
    return this.#matches.get(req);
  }

  #note(req: Request, pattern: string, methods: ReadonlySet<string>): void {
    const found = this.#matches.get(req);
    if (found === undefined) this.#matches.set(req, { pattern, methods: new Set(methods) });
    else for (const method of methods) found.methods.add(method);
  }
}
