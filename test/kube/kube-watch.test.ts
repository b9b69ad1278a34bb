// KubeWatch, the Watch that ListWatch drives, against a scripted API server:
// it can be stopped while still connecting, turns silence into a
// TimeoutError, non-200 answers into errors with statusCode, and skips
// lines ListWatch could not handle.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeWatch } from "../../shared/kube/kube-watch.ts";
import { waitFor } from "../forwarder/helpers.ts";

async function fakeApiServer(handler: (req: IncomingMessage, res: ServerResponse) => void) {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(req.url ?? "");
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: "fake", server: url, skipTLSVerify: true }],
    users: [{ name: "fake", token: "t" }],
    contexts: [{ name: "fake", cluster: "fake", user: "fake" }],
    currentContext: "fake",
  });
  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return { kubeConfig, requests, close, server };
}

function watchOnce(watch: KubeWatch, query: Record<string, string> = {}) {
  const events: Array<[string, unknown]> = [];
  let controller: AbortController | undefined;
  const done = new Promise<unknown>((resolve) => {
    void watch
      .watch("/api/v1/pods", query, (phase, obj) => events.push([phase, obj]), resolve)
      .then((c) => {
        controller = c;
      });
  });
  return { events, done, controller: () => controller };
}

const noHooks = { onStart: () => undefined, onEstablished: () => undefined };

test("close() aborts a watch that is still waiting for response headers", async () => {
  const api = await fakeApiServer(() => undefined); // never answers
  const watch = new KubeWatch(api.kubeConfig, noHooks);
  const { done } = watchOnce(watch);
  await waitFor(() => api.requests.length === 1, "the watch request");
  await new Promise((r) => setTimeout(r, 50));
  watch.close();
  const err = (await done) as Error;
  assert.equal(err.name, "AbortError");
  // and refuses new watches
  const refused = await watch.watch(
    "/api/v1/pods",
    {},
    () => undefined,
    () => assert.fail("no done"),
  );
  assert.equal(refused.signal.aborted, true);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(api.requests.length, 1);
  await api.close();
});

test("asks for bookmarks and a server-side timeout, keeps ListWatch's query", async () => {
  const api = await fakeApiServer((_req, res) => res.writeHead(200).end());
  const watch = new KubeWatch(api.kubeConfig, noHooks);
  const { done } = watchOnce(watch, { resourceVersion: "42", labelSelector: "a=b" });
  assert.equal(await done, null, "a stream the server ends is a clean done");
  const url = new URL(api.requests[0]!, "http://x");
  assert.equal(url.searchParams.get("watch"), "true");
  assert.equal(url.searchParams.get("resourceVersion"), "42");
  assert.equal(url.searchParams.get("labelSelector"), "a=b");
  assert.equal(url.searchParams.get("allowWatchBookmarks"), "true");
  const timeout = Number(url.searchParams.get("timeoutSeconds"));
  assert.ok(timeout >= 300 && timeout < 600, `timeoutSeconds ${timeout}`);
  await api.close();
});

test("silence past the idle timeout ends the watch with a TimeoutError (ListWatch resumes at once)", async () => {
  const api = await fakeApiServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.flushHeaders();
  });
  let established = 0;
  const watch = new KubeWatch(api.kubeConfig, { ...noHooks, onEstablished: () => established++ }, 150);
  const started = Date.now();
  const err = (await watchOnce(watch).done) as Error;
  assert.equal(err.name, "TimeoutError");
  assert.ok(Date.now() - started >= 140);
  assert.equal(established, 1);
  await api.close();
});

test("a non-200 answer is an error with its statusCode (410 makes ListWatch relist)", async () => {
  const api = await fakeApiServer((_req, res) => res.writeHead(410).end('{"kind":"Status","code":410}'));
  const watch = new KubeWatch(api.kubeConfig, noHooks);
  const err = (await watchOnce(watch).done) as Error & { statusCode?: number };
  assert.equal(err.statusCode, 410);
  assert.equal(err.message, "Gone");
  await api.close();
});

test("lines ListWatch cannot handle are reported and skipped; the rest is passed on", async () => {
  const api = await fakeApiServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}\n');
    res.write("not json\n\n");
    res.write('{"object":{}}\n');
    res.write('{"type":"ADDED","object":{"kind":"Pod"}}\n');
    res.end('{"type":"ERROR","object":{"kind":"Status","code":410}}\n');
  });
  const problems: string[] = [];
  const watch = new KubeWatch(api.kubeConfig, {
    ...noHooks,
    onBadEvent: (problem) => problems.push(problem),
  });
  const { events, done } = watchOnce(watch);
  assert.equal(await done, null);
  assert.deepEqual(
    events.map(([phase]) => phase),
    ["ADDED", "ERROR"],
  );
  assert.deepEqual(problems, [
    "watch line is not JSON",
    "watch line has no type",
    "watch event object has no metadata",
  ]);
  await api.close();
});
