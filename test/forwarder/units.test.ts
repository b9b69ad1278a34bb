// Unit tables for the forwarder's pure parts: routes, the CloudEvent it
// builds (checked with the functions' parser), coalescing, the retry policy
// and the per-destination queue.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseEventRequest } from "../../shared/events/index.ts";
import { type Change, coalesce, newChange } from "../../shared/forwarder/change.ts";
import { cloudEventRequest } from "../../shared/forwarder/cloud-event.ts";
import { forwarderConfigFromEnv } from "../../shared/forwarder/config.ts";
import { DeliveryQueue } from "../../shared/forwarder/delivery-queue.ts";
import {
  classifyStatus,
  DEFAULT_RETRY,
  parseRetryAfter,
  retryDelayMs,
} from "../../shared/forwarder/retry-policy.ts";
import { parseRoutes, redactUrl } from "../../shared/forwarder/routes.ts";
import { WATCHABLE_KINDS } from "../../shared/forwarder/watched-kinds.ts";
import {
  csiNodes,
  persistentVolumeClaims,
  persistentVolumes,
  type ResourceDescriptor,
} from "../../shared/kube/resources.ts";
import type { KubeObject } from "../../shared/kube/types.ts";

function object(
  r: ResourceDescriptor,
  name: string,
  extra: Partial<KubeObject["metadata"]> = {},
): KubeObject {
  return {
    apiVersion: r.group === "" ? r.version : `${r.group}/${r.version}`,
    kind: r.kind,
    metadata: {
      name,
      ...(r.namespaced ? { namespace: "ns" } : {}),
      uid: "uid-1",
      resourceVersion: "7",
      ...extra,
    },
  };
}

describe("routes", () => {
  test("parses url=kinds pairs, merges a repeated URL, expands *", () => {
    assert.deepEqual(
      parseRoutes(
        "http://127.0.0.1:8081=PersistentVolumeClaim,PersistentVolume; http://127.0.0.1:8082/x?code=a=b=Pod,Node\nhttp://127.0.0.1:8081=Pod",
      ),
      [
        { url: "http://127.0.0.1:8081/", kinds: ["PersistentVolumeClaim", "PersistentVolume", "Pod"] },
        { url: "http://127.0.0.1:8082/x?code=a=b", kinds: ["Pod", "Node"] },
      ],
    );
    assert.deepEqual(parseRoutes("https://f.example=*")[0]?.kinds, [...WATCHABLE_KINDS.keys()]);
    assert.equal(WATCHABLE_KINDS.size, 10);
  });

  test("refuses what it cannot use, saying why", () => {
    assert.throws(() => parseRoutes(" ; "), /no routes/);
    assert.throws(
      () => parseRoutes("http://x=Secret"),
      /unknown kind "Secret"; the forwarder watches PersistentVolumeClaim/,
    );
    assert.throws(() => parseRoutes("ftp://x=Pod"), /must be http or https/);
    assert.throws(() => parseRoutes("not a url=Pod"), /not a valid URL/);
    assert.throws(() => parseRoutes("Pod"), /must look like <url>=<Kind>/);
    assert.throws(() => parseRoutes("http://x= , "), /names no kinds/);
  });

  test("redacted URLs lose credentials and query", () => {
    assert.equal(
      redactUrl("https://user:pw@f.example:8443/api/x?code=secret"),
      "https://f.example:8443/api/x",
    );
  });
});

describe("configuration from the environment", () => {
  test("defaults", () => {
    const config = forwarderConfigFromEnv({ FORWARDER_ROUTES: "http://127.0.0.1:1=Pod" });
    assert.equal(config.concurrency, 16);
    assert.equal(config.maxQueue, 10_000);
    assert.equal(config.requestTimeoutMs, 30_000);
    assert.deepEqual(config.retry, DEFAULT_RETRY);
    assert.equal(config.replayExisting, true);
    assert.equal(config.shutdownGraceMs, 10_000);
    assert.equal(config.port, 0);
    assert.equal(config.authToken, undefined);
  });

  test("every variable is read and checked", () => {
    const config = forwarderConfigFromEnv({
      FORWARDER_ROUTES: "http://127.0.0.1:1=Pod",
      FORWARDER_CONCURRENCY: "4",
      FORWARDER_MAX_BATCH: "8",
      FORWARDER_MAX_QUEUE: "100",
      FORWARDER_AUTH_TOKEN: " t0k ",
      FORWARDER_TIMEOUT_MS: "5000",
      FORWARDER_RETRY_BASE_MS: "50",
      FORWARDER_RETRY_MAX_MS: "2000",
      FORWARDER_MAX_ATTEMPTS: "10",
      FORWARDER_MAX_SERVER_ERROR_ATTEMPTS: "2",
      FORWARDER_REPLAY_EXISTING: "false",
      SHUTDOWN_GRACE_MS: "100",
      PORT: "9090",
      HOST: "127.0.0.1",
    });
    assert.deepEqual(
      { ...config, routes: undefined },
      {
        routes: undefined,
        concurrency: 4,
        maxBatch: 8,
        maxQueue: 100,
        authToken: "t0k",
        requestTimeoutMs: 5000,
        retry: {
          baseMs: 50,
          maxMs: 2000,
          maxAttempts: 10,
          maxServerErrorAttempts: 2,
          maxRetryAfterMs: 300_000,
        },
        replayExisting: false,
        shutdownGraceMs: 100,
        port: 9090,
        host: "127.0.0.1",
      },
    );
    assert.throws(() => forwarderConfigFromEnv({}), /FORWARDER_ROUTES is not set/);
    const routes = "http://127.0.0.1:1=Pod";
    assert.throws(
      () => forwarderConfigFromEnv({ FORWARDER_ROUTES: routes, FORWARDER_MAX_QUEUE: "-1" }),
      /FORWARDER_MAX_QUEUE/,
    );
    assert.throws(
      () => forwarderConfigFromEnv({ FORWARDER_ROUTES: routes, FORWARDER_REPLAY_EXISTING: "maybe" }),
      /true or false/,
    );
  });
});

describe("the CloudEvent", () => {
  test("a namespaced object: binary mode as ApiServerSource sends it, read back by shared/events", () => {
    const change = newChange("update", persistentVolumeClaims, object(persistentVolumeClaims, "data"));
    const { headers, body } = cloudEventRequest(change, "https://10.0.0.1:6443");
    assert.deepEqual(headers, {
      "content-type": "application/json",
      "ce-specversion": "1.0",
      "ce-id": change.id,
      "ce-type": "dev.knative.apiserver.resource.update",
      "ce-source": "https://10.0.0.1:6443",
      "ce-subject": "/apis/v1/namespaces/ns/persistentvolumeclaims/data",
      "ce-kind": "PersistentVolumeClaim",
      "ce-apiversion": "v1",
      "ce-name": "data",
      "ce-namespace": "ns",
    });
    assert.deepEqual(parseEventRequest(headers, Buffer.from(body)), [
      {
        kind: "resource",
        action: "update",
        ref: { apiVersion: "v1", kind: "PersistentVolumeClaim", name: "data", namespace: "ns" },
        object: change.object,
        id: change.id,
        source: "https://10.0.0.1:6443",
        resourceVersion: "7",
      },
    ]);
  });

  test("cluster-scoped objects, core and storage.k8s.io", () => {
    for (const [r, subject] of [
      [persistentVolumes, "/apis/v1/namespaces//persistentvolumes/pv-1"],
      [csiNodes, "/apis/storage.k8s.io/v1/namespaces//csinodes/pv-1"],
    ] as const) {
      const change = newChange("delete", r, object(r, "pv-1"));
      const { headers, body } = cloudEventRequest(change, "https://api");
      assert.equal(headers["ce-subject"], subject);
      assert.equal(headers["ce-namespace"], "");
      const [event] = parseEventRequest(headers, body);
      assert.equal(event?.kind, "resource");
      if (event?.kind !== "resource") return;
      assert.equal(event.action, "delete");
      assert.equal(event.ref.namespace, undefined);
      assert.equal(event.ref.kind, r.kind);
    }
  });
});

describe("coalescing", () => {
  const pvcObject = (rv: string, uid = "uid-1") =>
    object(persistentVolumeClaims, "data", { resourceVersion: rv, uid });
  const change = (action: Change["action"], rv: string, uid?: string) =>
    newChange(action, persistentVolumeClaims, pvcObject(rv, uid));

  test("a newer state replaces an undelivered one; add stays add, delete wins", () => {
    const table: Array<[Change["action"], Change["action"], Change["action"] | undefined]> = [
      ["add", "update", "add"],
      ["update", "update", "update"],
      ["add", "delete", "delete"],
      ["update", "delete", "delete"],
      ["delete", "add", undefined],
      ["delete", "update", undefined],
    ];
    for (const [older, newer, expected] of table) {
      const a = change(older, "1");
      const b = change(newer, "2");
      const merged = coalesce(a, b);
      assert.equal(merged?.action, expected, `${older} + ${newer}`);
      if (merged) {
        assert.equal(merged.object.metadata.resourceVersion, "2");
        assert.equal(merged.id, b.id, "the merged event is a new event");
      }
    }
  });

  test("different uids (recreated in between) and different objects are kept apart", () => {
    assert.equal(coalesce(change("update", "1", "a"), change("update", "2", "b")), undefined);
    const other = newChange("update", persistentVolumeClaims, object(persistentVolumeClaims, "other"));
    assert.equal(coalesce(change("update", "1"), other), undefined);
  });
});

describe("retry policy", () => {
  test("which answers are retried", () => {
    const table: Array<[number, string]> = [
      [200, "delivered"],
      [202, "delivered"],
      [204, "delivered"],
      [301, "rejected"],
      [400, "rejected"],
      [404, "rejected"],
      [409, "rejected"],
      [413, "rejected"],
      [429, "transient"],
      [500, "server-error"],
      [501, "server-error"],
      [502, "transient"],
      [503, "transient"],
      [504, "transient"],
    ];
    for (const [status, expected] of table) assert.equal(classifyStatus(status), expected, String(status));
  });

  test("backoff doubles from baseMs up to maxMs with equal jitter; Retry-After is a floor", () => {
    const options = { ...DEFAULT_RETRY, baseMs: 100, maxMs: 1000 };
    assert.equal(
      retryDelayMs(1, options, undefined, () => 0),
      50,
    );
    assert.equal(
      retryDelayMs(1, options, undefined, () => 1),
      100,
    );
    assert.equal(
      retryDelayMs(2, options, undefined, () => 1),
      200,
    );
    assert.equal(
      retryDelayMs(4, options, undefined, () => 1),
      800,
    );
    assert.equal(
      retryDelayMs(5, options, undefined, () => 1),
      1000,
    );
    assert.equal(
      retryDelayMs(50, options, undefined, () => 0),
      500,
    );
    assert.equal(
      retryDelayMs(1, options, 3000, () => 1),
      3000,
    );
    assert.equal(
      retryDelayMs(1, options, 10, () => 1),
      100,
      "a short Retry-After does not shorten backoff",
    );
    assert.equal(
      retryDelayMs(1, options, 10_000_000, () => 1),
      options.maxRetryAfterMs,
    );
  });

  test("Retry-After: seconds or an HTTP date", () => {
    const now = Date.parse("2024-01-01T00:00:00Z");
    assert.equal(parseRetryAfter("3", now), 3000);
    assert.equal(parseRetryAfter(["2", "9"], now), 2000);
    assert.equal(parseRetryAfter("Mon, 01 Jan 2024 00:00:05 GMT", now), 5000);
    assert.equal(parseRetryAfter("Sun, 31 Dec 2023 00:00:05 GMT", now), 0);
    assert.equal(parseRetryAfter("soon", now), undefined);
    assert.equal(parseRetryAfter(undefined, now), undefined);
    assert.equal(parseRetryAfter("-1", now), undefined);
  });
});

describe("delivery queue", () => {
  interface Pending {
    change: Change;
    superseded: () => boolean;
    finish: () => void;
  }
  function harness(concurrency: number, maxQueue: number, maxBatch = 1) {
    const pending: Pending[] = [];
    const started: string[] = [];
    const batches: string[][] = [];
    const queue = new DeliveryQueue({
      concurrency,
      maxQueue,
      maxBatch,
      deliver: (changes, superseded) =>
        new Promise<void>((finish) => {
          const names = changes.map((c) => `${c.object.metadata.name}@${c.object.metadata.resourceVersion}`);
          started.push(...names);
          batches.push(names);
          // Each change of a batch is listed; finishing any of them finishes the whole delivery.
          for (const change of changes) pending.push({ change, superseded, finish });
        }),
    });
    const finishFirst = async (name: string) => {
      const i = pending.findIndex((p) => p.change.object.metadata.name === name);
      assert.ok(i >= 0, `${name} in flight`);
      const [p] = pending.splice(i, 1);
      for (let j = pending.length - 1; j >= 0; j--)
        if (pending[j]?.finish === p?.finish) pending.splice(j, 1);
      p?.finish();
      await new Promise((r) => setImmediate(r));
    };
    return { queue, pending, started, batches, finishFirst };
  }
  const at = (name: string, rv: string, action: Change["action"] = "update") =>
    newChange(action, persistentVolumeClaims, object(persistentVolumeClaims, name, { resourceVersion: rv }));

  test("one delivery per object at a time, objects in parallel up to the limit, fair order", async () => {
    const { queue, started, finishFirst } = harness(2, 100);
    assert.equal(queue.enqueue(at("a", "1", "add")), "queued");
    assert.equal(queue.enqueue(at("a", "2")), "queued", "a is in flight: the update waits");
    assert.equal(queue.enqueue(at("b", "3", "add")), "queued");
    assert.equal(queue.enqueue(at("c", "4", "add")), "queued");
    assert.deepEqual(started, ["a@1", "b@3"]);
    assert.equal(queue.inFlight, 2);
    assert.equal(queue.waiting, 2);
    await finishFirst("a");
    assert.deepEqual(started, ["a@1", "b@3", "c@4"], "c became ready before a's next change");
    await finishFirst("b");
    assert.deepEqual(started, ["a@1", "b@3", "c@4", "a@2"]);
    await finishFirst("c");
    await finishFirst("a");
    await queue.idle();
    assert.equal(queue.inFlight, 0);
  });

  test("waiting changes of one object fold into one; a delete starts a new one", async () => {
    const { queue, started, finishFirst } = harness(1, 100);
    queue.enqueue(at("a", "1", "add"));
    assert.equal(queue.enqueue(at("a", "2")), "queued");
    assert.equal(queue.enqueue(at("a", "3")), "coalesced");
    assert.equal(queue.enqueue(at("a", "4", "delete")), "coalesced");
    assert.equal(queue.enqueue(at("a", "5", "add")), "queued", "nothing folds past a delete");
    assert.equal(queue.waiting, 2);
    await finishFirst("a");
    await finishFirst("a");
    await finishFirst("a");
    assert.deepEqual(started, ["a@1", "a@4", "a@5"]);
  });

  test("a full queue drops changes of new objects but still folds those of queued ones", async () => {
    const { queue } = harness(1, 2);
    queue.enqueue(at("busy", "1"));
    assert.equal(queue.enqueue(at("x", "2")), "queued");
    assert.equal(queue.enqueue(at("y", "3")), "queued");
    assert.equal(queue.enqueue(at("z", "4")), "dropped");
    assert.equal(queue.enqueue(at("x", "5")), "coalesced");
    assert.equal(queue.waiting, 2);
    assert.deepEqual(
      queue.close().map((c) => `${c.object.metadata.name}@${c.object.metadata.resourceVersion}`),
      ["x@5", "y@3"],
    );
    assert.equal(queue.enqueue(at("w", "6")), "dropped", "closed");
  });

  test("a backlog goes out in batches of different objects; a lone change goes out at once, alone", async () => {
    const { queue, batches, finishFirst } = harness(1, 100, 3);
    queue.enqueue(at("a", "1", "add"));
    assert.deepEqual(batches, [["a@1"]], "a free slot: no waiting for company");
    queue.enqueue(at("a", "2"));
    queue.enqueue(at("b", "3", "add"));
    queue.enqueue(at("c", "4", "add"));
    queue.enqueue(at("d", "5", "add"));
    await finishFirst("a");
    assert.deepEqual(batches[1], ["b@3", "c@4", "d@5"], "three objects, a's next change not among them");
    await finishFirst("b");
    assert.deepEqual(batches[2], ["a@2"], "a's next change only after the delivery that held a");
    await finishFirst("a");
    await queue.idle();
  });

  test("a batch is superseded only when every change in it has a newer state queued", async () => {
    const { queue, pending, started, finishFirst } = harness(1, 100, 2);
    queue.enqueue(at("x", "0", "add"));
    queue.enqueue(at("a", "1", "add"));
    queue.enqueue(at("b", "2", "add"));
    await finishFirst("x");
    const batch = pending[0]!;
    queue.enqueue(at("a", "3"));
    assert.equal(batch.superseded(), false, "b has nothing newer");
    assert.equal(queue.waiting, 1, "a's newer state still waits on its own");
    queue.enqueue(at("b", "4"));
    assert.equal(batch.superseded(), true);
    await finishFirst("a");
    assert.deepEqual(started.slice(-2), ["a@3", "b@4"]);
    assert.deepEqual(
      pending.map((p) => p.change.action),
      ["add", "add"],
      "both receivers may never have seen the adds",
    );
  });

  test("an in-flight change gives way to a newer state once one is queued", async () => {
    const { queue, pending, started, finishFirst } = harness(1, 10);
    queue.enqueue(at("a", "1", "add"));
    assert.equal(pending[0]?.superseded(), false, "nothing newer yet");
    queue.enqueue(at("a", "2"));
    assert.equal(pending[0]?.superseded(), true);
    await finishFirst("a");
    assert.deepEqual(started, ["a@1", "a@2"]);
    assert.equal(pending[0]?.change.action, "add", "the receiver may never have seen the add");
  });
});
