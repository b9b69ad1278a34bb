// The route table answers 405 / OPTIONS and names metric routes from the
// patterns a function added, matched by express itself: these cases pin down
// that what the table calls a match is exactly what express then routes.
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, test } from "node:test";
import request from "supertest";
import { createFunctionApp } from "../../shared/http/function-app.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { echoSpec } from "./echo-function.ts";

const REPO = join(import.meta.dirname, "..", "..");

function appWithRoutes() {
  const metrics = createMetricsRegistry({ defaultMetrics: false });
  const app = createFunctionApp(
    echoSpec({
      metrics,
      routes(router) {
        router.get("/explain/:name", (req, res) => void res.json({ explained: req.params.name }));
        router.post("/explain/all", (_req, res) => void res.json({ all: true }));
        router.put("/items/:id", (req, res) => void res.json({ put: req.params.id }));
        router.patch("/items/:id", (req, res) => void res.json({ patched: req.params.id }));
        router.delete("/items/:id", (req, res) => void res.json({ deleted: req.params.id }));
      },
    }),
  );
  return { app, metrics };
}

describe("route table", () => {
  const cases: {
    name: string;
    method: "get" | "post" | "put" | "patch" | "delete" | "head" | "options";
    path: string;
    status: number;
    allow?: string;
    body?: unknown;
  }[] = [
    { name: "a route's pattern", method: "get", path: "/explain/a", status: 200, body: { explained: "a" } },
    {
      name: "express ignores case",
      method: "get",
      path: "/EXPLAIN/b",
      status: 200,
      body: { explained: "b" },
    },
    { name: "a trailing slash", method: "get", path: "/explain/c/", status: 200, body: { explained: "c" } },
    {
      name: "a decoded parameter",
      method: "get",
      path: "/explain/a%20b",
      status: 200,
      body: { explained: "a b" },
    },
    { name: "HEAD where GET is", method: "head", path: "/explain/a", status: 200 },
    {
      name: "the literal route of two",
      method: "post",
      path: "/explain/all",
      status: 200,
      body: { all: true },
    },
    {
      name: "the methods of every matching pattern",
      method: "delete",
      path: "/explain/all",
      status: 405,
      allow: "GET, HEAD, POST",
    },
    { name: "one pattern's methods", method: "post", path: "/explain/x", status: 405, allow: "GET, HEAD" },
    {
      name: "OPTIONS of a known path",
      method: "options",
      path: "/explain/all",
      status: 204,
      allow: "GET, HEAD, POST",
    },
    { name: "PUT", method: "put", path: "/items/7", status: 200, body: { put: "7" } },
    { name: "PATCH", method: "patch", path: "/items/7", status: 200, body: { patched: "7" } },
    { name: "DELETE", method: "delete", path: "/items/7", status: 200, body: { deleted: "7" } },
    {
      name: "a built-in route's methods",
      method: "get",
      path: "/items/7",
      status: 405,
      allow: "DELETE, PATCH, PUT",
    },
    { name: "no segment for the parameter", method: "get", path: "/explain/", status: 404 },
    { name: "a segment too many", method: "get", path: "/explain/a/b", status: 404 },
    { name: "an undecodable parameter", method: "get", path: "/explain/%E0%A4%A", status: 400 },
  ];
  for (const c of cases) {
    test(`${c.method.toUpperCase()} ${c.path}: ${c.name}`, async () => {
      const { app } = appWithRoutes();
      const res = await request(app)[c.method](c.path);
      assert.equal(res.status, c.status);
      assert.equal(res.headers.allow, c.allow);
      if (c.body !== undefined) assert.deepEqual(res.body, c.body);
    });
  }

  test("metrics name the first pattern that matches, or unmatched", async () => {
    const { app, metrics } = appWithRoutes();
    await request(app).get("/Explain/one/");
    await request(app).delete("/explain/all");
    await request(app).get("/explain/a/b");
    const text = await metrics.metrics();
    assert.match(
      text,
      /function_requests_total\{function="echo",route="\/explain\/:name",outcome="ok"\} 1\n/,
    );
    assert.match(
      text,
      /function_requests_total\{function="echo",route="\/explain\/:name",outcome="bad_request"\} 1\n/,
    );
    assert.match(
      text,
      /function_requests_total\{function="echo",route="unmatched",outcome="bad_request"\} 1\n/,
    );
  });

  test("a route that is not a path pattern is refused when the function is made", () => {
    assert.throws(
      () =>
        createFunctionApp(
          echoSpec({
            routes(router) {
              router.get(/^\/regex$/ as unknown as string, (_req, res) => void res.json({}));
            },
          }),
        ),
      /a function route is a path pattern/,
    );
  });

  test("the HTTP shell and the entries read no private state of express's router", async () => {
    const dirs = ["shared/http", "functions"];
    const files: string[] = [];
    for (const dir of dirs) {
      for (const entry of await readdir(join(REPO, dir), { recursive: true })) {
        if (entry.endsWith(".ts")) files.push(join(dir, entry));
      }
    }
    assert.ok(files.length > 10, "found the sources");
    const internals = /\b_router\b|\.stack\b|\bLayer\b|\.handle\(|\bmatchedRoute\b/;
    for (const file of files) {
      const text = (await readFile(join(REPO, file), "utf8"))
        .split("\n")
        .filter((line) => !line.trimStart().startsWith("//") && !/\berr\.stack\b/.test(line));
      const hit = text.find((line) => internals.test(line));
      assert.equal(hit, undefined, `${file} reads express internals: ${hit}`);
    }
  });
});
