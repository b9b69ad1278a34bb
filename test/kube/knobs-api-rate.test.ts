// KUBE_API_QPS / KUBE_API_BURST (upstream --kube-api-qps / --kube-api-burst):
// a token bucket in KubeJsonClient, off by default. Against a real local
// HTTP server standing in for kube-apiserver: with the cap, N requests take
// at least (N - burst) / qps seconds and the server sees no more than burst
// arrive at once; without it they go at once.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { controllerKnobsFromEnv } from "../../shared/config.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { TokenBucket } from "../../shared/kube/rate-limiter.ts";
import { secrets } from "../../shared/kube/resources.ts";

let server: Server;
let kubeConfig: KubeConfig;
/** performance.now() of each request the server received. */
const arrivals: number[] = [];

before(async () => {
  server = createServer((req, res) => {
    arrivals.push(performance.now());
    res.setHeader("content-type", "application/json");
    res.end(
      JSON.stringify({ apiVersion: "v1", kind: "Secret", metadata: { name: req.url?.split("/").at(-1) } }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: "c", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: "u", token: "t" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** Sends n GETs at once; returns the seconds until the last answer and the arrivals at the server (ms after the start, in order). */
async function burstOf(client: KubeJsonClient, n: number): Promise<{ seconds: number; arrived: number[] }> {
  arrivals.length = 0;
  const start = performance.now();
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) => client.get(secrets, `cm-${i}`, "default")),
  );
  assert.equal(answers.length, n);
  assert.equal(answers[3]?.metadata.name, "cm-3", "the server's answers came back");
  return {
    seconds: (performance.now() - start) / 1000,
    arrived: arrivals.map((t) => t - start).sort((a, b) => a - b),
  };
}

/** The most requests the server received within any `windowMs`. */
function peak(arrived: number[], windowMs: number): number {
  const t = [...arrived].sort((a, b) => a - b);
  let best = 0;
  for (let i = 0; i < t.length; i++) {
    let j = i;
    while (j < t.length && (t[j] as number) - (t[i] as number) < windowMs) j++;
    best = Math.max(best, j - i);
  }
  return best;
}

describe("the API request cap", () => {
  test("qps 10, burst 3: 13 requests take at least (13 - 3) / 10 = 1 s, the k-th no sooner than its turn", async () => {
    const rate = controllerKnobsFromEnv({ KUBE_API_QPS: "10", KUBE_API_BURST: "3" }).kubeApiRate;
    assert.deepEqual(rate, { qps: 10, burst: 3 });
    const client = new KubeJsonClient(kubeConfig, { rate });
    try {
      const { seconds, arrived } = await burstOf(client, 13);
      assert.ok(seconds >= 1 - 0.01, `took ${seconds} s`);
      assert.equal(arrived.length, 13);
      // The k-th request (from 0) cannot leave before (k + 1 - burst) refills of 100 ms.
      arrived.forEach((ms, k) => {
        if (k >= 3) assert.ok(ms >= (k + 1 - 3) * 100 - 2, `request ${k} arrived after ${ms} ms`);
      });
    } finally {
      await client.close();
    }
  });

  test("unset (our default): the same requests go at once", async () => {
    const rate = controllerKnobsFromEnv({}).kubeApiRate;
    assert.equal(rate, undefined);
    const client = new KubeJsonClient(kubeConfig, { rate });
    try {
      // A first request opens the connection pool, as the capped client's first ones did.
      await client.get(secrets, "warm-up", "default");
      const { seconds, arrived } = await burstOf(client, 13);
      assert.ok(seconds < 1, `took ${seconds} s, what the cap above could not do`);
      assert.ok(peak(arrived, 100) > 3, "more than a burst arrived within one refill of the cap above");
    } finally {
      await client.close();
    }
  });

  test("after a quiet spell the bucket is full again: a burst goes at once", async () => {
    const client = new KubeJsonClient(kubeConfig, { rate: { qps: 5, burst: 4 } });
    try {
      await burstOf(client, 4);
      await new Promise((resolve) => setTimeout(resolve, 900));
      const { seconds } = await burstOf(client, 4);
      assert.ok(seconds < 0.15, `took ${seconds} s`);
    } finally {
      await client.close();
    }
  });
});

describe("TokenBucket", () => {
  test("serves waiters in arrival order", async () => {
    const bucket = new TokenBucket({ qps: 100, burst: 1 });
    const order: number[] = [];
    await Promise.all([0, 1, 2, 3, 4].map((i) => bucket.take().then(() => order.push(i))));
    assert.deepEqual(order, [0, 1, 2, 3, 4]);
  });

  test("refuses a rate it cannot honour", () => {
    assert.throws(() => new TokenBucket({ qps: 0, burst: 1 }), RangeError);
    assert.throws(() => new TokenBucket({ qps: 1, burst: 0 }), RangeError);
  });
});

describe("KUBE_API_QPS / KUBE_API_BURST from the environment", () => {
  test("0 or unset: no cap; QPS alone: upstream's burst of 10; fractions allowed", () => {
    assert.equal(controllerKnobsFromEnv({ KUBE_API_QPS: "0" }).kubeApiRate, undefined);
    assert.deepEqual(controllerKnobsFromEnv({ KUBE_API_QPS: "5" }).kubeApiRate, { qps: 5, burst: 10 });
    assert.deepEqual(controllerKnobsFromEnv({ KUBE_API_QPS: "0.5", KUBE_API_BURST: "1" }).kubeApiRate, {
      qps: 0.5,
      burst: 1,
    });
  });

  test("bad values stop the start with the variable named", () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ KUBE_API_QPS: "-1" }, /^KUBE_API_QPS must be a number from 0 to 1000000, got "-1"$/],
      [{ KUBE_API_QPS: "5qps" }, /^KUBE_API_QPS must be a number/],
      [{ KUBE_API_QPS: "1e3" }, /^KUBE_API_QPS must be a number/],
      [{ KUBE_API_QPS: "5", KUBE_API_BURST: "0" }, /^KUBE_API_BURST must be an integer from 1 to 1000000/],
      [{ KUBE_API_QPS: "5", KUBE_API_BURST: "2.5" }, /^KUBE_API_BURST must be an integer/],
      [{ KUBE_API_BURST: "10" }, /^KUBE_API_BURST needs KUBE_API_QPS above 0/],
    ];
    for (const [env, message] of cases)
      assert.throws(() => controllerKnobsFromEnv(env), { message }, JSON.stringify(env));
  });
});
