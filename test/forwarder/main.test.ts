// `npm run forwarder` as a process: configuration from the environment, the
// ready line on stdout after the informers synced, /healthz /readyz /metrics,
// a delivered change, SIGTERM -> exit 0; bad configuration -> exit 1.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { createKubeClients } from "../../shared/kube/client.ts";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims } from "../../shared/kube/resources.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { pvc, startReceiver, waitFor } from "./helpers.ts";

let sandbox: TestSandbox;
let kube: KubeJsonClient;

before(async () => {
  sandbox = await startTestSandbox();
  kube = createKubeClients(sandbox.kubeConfig).json;
});

after(async () => {
  await kube.close();
  await sandbox.close();
});

function spawnForwarder(env: Record<string, string>) {
  const child = spawn(process.execPath, ["shared/forwarder/main.ts"], {
    env: { ...process.env, PORT: "0", LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const lines: string[] = [];
  createInterface({ input: child.stdout }).on("line", (line) => lines.push(line));
  return { child, lines, stderr: () => stderr };
}

test("the forwarder process announces readiness, serves probes and metrics, delivers, and exits 0 on SIGTERM", async () => {
  const receiver = await startReceiver();
  const { child, lines, stderr } = spawnForwarder({
    KUBECONFIG: sandbox.kubeconfigPath,
    FORWARDER_ROUTES: `${receiver.url}=PersistentVolumeClaim`,
    FORWARDER_AUTH_TOKEN: "process-token",
  });
  try {
    await waitFor(() => lines.length > 0 || child.exitCode !== null, "the ready line", 20_000);
    assert.equal(lines.length, 1, stderr());
    const ready = JSON.parse(lines[0]!) as { ready: boolean; forwarder: boolean; url: string };
    assert.equal(ready.ready, true);
    assert.equal(ready.forwarder, true);
    assert.match(ready.url, /^http:\/\/127\.0\.0\.1:\d+$/);

    assert.equal((await fetch(`${ready.url}/healthz`)).status, 200);
    const readyz = await fetch(`${ready.url}/readyz`);
    assert.equal(readyz.status, 200);
    assert.deepEqual(await readyz.json(), { ready: true });

    await kube.create(persistentVolumeClaims, pvc("from-process"));
    await waitFor(() => receiver.delivered().length === 1, "the delivery");
    assert.equal(receiver.requests[0]?.headers.authorization, "Bearer process-token");

    const metrics = await (await fetch(`${ready.url}/metrics`)).text();
    assert.match(
      metrics,
      new RegExp(
        `forwarder_events_delivered_total\\{destination="${receiver.url.replaceAll(".", "\\.")}",kind="PersistentVolumeClaim"\\} 1`,
      ),
    );
    assert.match(metrics, /forwarder_queue_depth\{destination="[^"]+"\} 0/);
    assert.match(metrics, /forwarder_informer_synced\{kind="PersistentVolumeClaim"\} 1/);

    child.kill("SIGTERM");
    const [code] = (await once(child, "exit")) as [number | null];
    assert.equal(code, 0, stderr());
    assert.equal(lines.length, 1, "stdout carries the ready line only");
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
    await receiver.close();
    await sandbox.admin.reset();
  }
});

test("bad configuration stops the process with exit 1 and says why", async () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ KUBECONFIG: sandbox.kubeconfigPath, FORWARDER_ROUTES: "" }, /FORWARDER_ROUTES is not set/],
    [
      { KUBECONFIG: sandbox.kubeconfigPath, FORWARDER_ROUTES: "http://127.0.0.1:1=Secret" },
      /unknown kind \\"Secret\\"/,
    ],
    [
      {
        KUBECONFIG: sandbox.kubeconfigPath,
        FORWARDER_ROUTES: "http://127.0.0.1:1=Pod",
        FORWARDER_CONCURRENCY: "0",
      },
      /FORWARDER_CONCURRENCY must be an integer from 1/,
    ],
  ];
  for (const [env, message] of cases) {
    const { child, lines, stderr } = spawnForwarder(env);
    const [code] = (await once(child, "exit")) as [number | null];
    assert.equal(code, 1);
    assert.deepEqual(lines, []);
    assert.match(stderr(), message);
  }
});
