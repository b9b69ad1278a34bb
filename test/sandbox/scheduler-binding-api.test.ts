// The sandbox API server's pods/binding subresource and graceful pod
// deletion, as the scheduler and the kubelet use them, over real HTTP.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { type ApiServerHandle, startApiServer } from "../../sandbox/apiserver/server.ts";

let graceful: ApiServerHandle;
let bare: ApiServerHandle;

before(async () => {
  graceful = await startApiServer({ gracefulPodDeletion: true });
  bare = await startApiServer();
});
after(() => Promise.all([graceful.close(), bare.close()]));
beforeEach(async () => {
  for (const api of [graceful, bare]) await fetch(`${api.url}/_sandbox/reset`, { method: "POST" });
});

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

async function call(api: ApiServerHandle, method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: { "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const podsPath = "/api/v1/namespaces/default/pods";

async function createPod(
  api: ApiServerHandle,
  name: string,
  spec: Record<string, unknown> = {},
): Promise<Answer> {
  const answer = await call(api, "POST", podsPath, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: { containers: [{ name: "c", image: "busybox" }], ...spec },
  });
  assert.equal(answer.status, 201, JSON.stringify(answer.body));
  return answer;
}

function binding(name: string, node: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Binding",
    metadata: { name, ...extra },
    target: { kind: "Node", name: node },
  };
}

describe("pods/binding", () => {
  it("assigns the node, copies the Binding's annotations and sets PodScheduled in one write", async () => {
    await createPod(graceful, "web");
    const answer = await call(
      graceful,
      "POST",
      `${podsPath}/web/binding`,
      binding("web", "node-a", { annotations: { "example.com/by": "test" } }),
    );
    assert.equal(answer.status, 201);
    assert.deepEqual(answer.body, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Success",
      code: 201,
    });
    const pod = (await call(graceful, "GET", `${podsPath}/web`)).body as {
      spec: { nodeName: string };
      metadata: { annotations: Record<string, string> };
      status: { conditions: { type: string; status: string }[] };
    };
    assert.equal(pod.spec.nodeName, "node-a");
    assert.equal(pod.metadata.annotations["example.com/by"], "test");
    assert.deepEqual(
      pod.status.conditions.map((c) => [c.type, c.status]),
      [["PodScheduled", "True"]],
    );
  });

  it("refuses a second binding with 409 naming the node", async () => {
    await createPod(graceful, "web");
    assert.equal(
      (await call(graceful, "POST", `${podsPath}/web/binding`, binding("web", "node-a"))).status,
      201,
    );
    const again = await call(graceful, "POST", `${podsPath}/web/binding`, binding("web", "node-b"));
    assert.equal(again.status, 409);
    assert.equal(again.body.reason, "Conflict");
    assert.equal(
      again.body.message,
      'Operation cannot be fulfilled on pods/binding "web": pod web is already assigned to node "node-a"',
    );
  });

  it("checks the Binding: name as in the URL, a Node target with a name, uid precondition, existing pod", async () => {
    await createPod(graceful, "web");
    const wrongName = await call(graceful, "POST", `${podsPath}/web/binding`, binding("other", "node-a"));
    assert.equal(wrongName.status, 400);
    assert.equal(wrongName.body.message, "name in URL does not match name in Binding object");
    const wrongKind = await call(graceful, "POST", `${podsPath}/web/binding`, {
      metadata: { name: "web" },
      target: { kind: "Pod", name: "x" },
    });
    assert.equal(wrongKind.status, 422);
    const noTarget = await call(graceful, "POST", `${podsPath}/web/binding`, { metadata: { name: "web" } });
    assert.equal(noTarget.status, 422);
    const wrongUid = await call(
      graceful,
      "POST",
      `${podsPath}/web/binding`,
      binding("web", "n", { uid: "nope" }),
    );
    assert.equal(wrongUid.status, 409);
    const missing = await call(graceful, "POST", `${podsPath}/ghost/binding`, binding("ghost", "node-a"));
    assert.equal(missing.status, 404);
    const get = await call(graceful, "GET", `${podsPath}/web/binding`);
    assert.equal(get.status, 405);
    const pod = (await call(graceful, "GET", `${podsPath}/web`)).body as { spec: { nodeName?: string } };
    assert.equal(pod.spec.nodeName, undefined);
  });
});

describe("graceful pod deletion", () => {
  it("marks a scheduled pod with its grace period; a DELETE with grace 0 and its uid removes it", async () => {
    const created = await createPod(graceful, "web", {
      nodeName: "node-a",
      terminationGracePeriodSeconds: 20,
    });
    const uid = (created.body.metadata as { uid: string }).uid;
    const before = Date.now();
    const marked = await call(graceful, "DELETE", `${podsPath}/web`);
    assert.equal(marked.status, 200);
    const meta = marked.body.metadata as { deletionTimestamp: string; deletionGracePeriodSeconds: number };
    assert.equal(meta.deletionGracePeriodSeconds, 20);
    const due = Date.parse(meta.deletionTimestamp);
    assert.ok(due >= before + 19_000 && due <= Date.now() + 21_000, meta.deletionTimestamp);
    // Repeating the DELETE without a shorter period changes nothing.
    const again = await call(graceful, "DELETE", `${podsPath}/web`);
    assert.equal(
      (again.body.metadata as { resourceVersion: string }).resourceVersion,
      (marked.body.metadata as { resourceVersion: string }).resourceVersion,
    );
    assert.equal((await call(graceful, "GET", `${podsPath}/web`)).status, 200);
    // A status write in the grace period (the kubelet's, the pod gc's Failed) keeps the pod: only the final DELETE removes it.
    const terminating = (await call(graceful, "GET", `${podsPath}/web`)).body;
    const failed = await call(graceful, "PUT", `${podsPath}/web/status`, {
      ...terminating,
      status: { phase: "Failed" },
    });
    assert.equal(failed.status, 200, JSON.stringify(failed.body));
    assert.equal(
      ((await call(graceful, "GET", `${podsPath}/web`)).body.status as { phase: string }).phase,
      "Failed",
    );

    const wrongUid = await call(graceful, "DELETE", `${podsPath}/web`, {
      kind: "DeleteOptions",
      apiVersion: "v1",
      gracePeriodSeconds: 0,
      preconditions: { uid: "someone-else" },
    });
    assert.equal(wrongUid.status, 409);
    const final = await call(graceful, "DELETE", `${podsPath}/web`, {
      kind: "DeleteOptions",
      apiVersion: "v1",
      gracePeriodSeconds: 0,
      preconditions: { uid },
    });
    assert.equal(final.status, 200);
    assert.equal((await call(graceful, "GET", `${podsPath}/web`)).status, 404);
  });

  it("defaults to 30 s, shortens on request, and removes unscheduled or finished pods at once", async () => {
    await createPod(graceful, "default-grace", { nodeName: "node-a" });
    const marked = await call(graceful, "DELETE", `${podsPath}/default-grace`);
    assert.equal(
      (marked.body.metadata as { deletionGracePeriodSeconds: number }).deletionGracePeriodSeconds,
      30,
    );
    const shorter = await call(graceful, "DELETE", `${podsPath}/default-grace?gracePeriodSeconds=5`);
    assert.equal(
      (shorter.body.metadata as { deletionGracePeriodSeconds: number }).deletionGracePeriodSeconds,
      5,
    );

    await createPod(graceful, "pending");
    await call(graceful, "DELETE", `${podsPath}/pending`);
    assert.equal((await call(graceful, "GET", `${podsPath}/pending`)).status, 404);

    await createPod(graceful, "done", { nodeName: "node-a" });
    const status = await call(graceful, "GET", `${podsPath}/done`);
    const pod = status.body as { status: Record<string, unknown> };
    pod.status = { phase: "Succeeded" };
    assert.equal((await call(graceful, "PUT", `${podsPath}/done/status`, pod)).status, 200);
    await call(graceful, "DELETE", `${podsPath}/done`);
    assert.equal((await call(graceful, "GET", `${podsPath}/done`)).status, 404);

    const bad = await call(graceful, "DELETE", `${podsPath}/default-grace?gracePeriodSeconds=soon`);
    assert.equal(bad.status, 400);
  });

  it("is off on a bare API server: a scheduled pod goes at once", async () => {
    await createPod(bare, "web", { nodeName: "node-a" });
    assert.equal((await call(bare, "DELETE", `${podsPath}/web`)).status, 200);
    assert.equal((await call(bare, "GET", `${podsPath}/web`)).status, 404);
  });
});
