// The admission function as its own process, the way `npm run serve` and a
// container run it: configured by env, ready line, a review answered over
// real HTTP with its StorageClasses from a copy started with the process,
// clean exit on SIGTERM.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { eventually } from "../helpers/eventually.ts";
import { startFunctionProcess } from "../helpers/function-process.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { claim, ourDriver, patched, review, storageClass } from "./fixtures.ts";

let sandbox: TestSandbox;

before(async () => {
  sandbox = await startTestSandbox();
  await sandbox.admin.seed([storageClass("fast", { isDefault: true })]);
});
after(async () => {
  await sandbox.close();
});

test("FUNCTION=admission serves reviews and stops on SIGTERM", async () => {
  const fn = await startFunctionProcess("admission", {
    KUBECONFIG: sandbox.kubeconfigPath,
    PROVISIONER_DRIVERS: ourDriver,
    ADMISSION_LOOKUP_TIMEOUT_MS: "1500",
  });
  try {
    assert.equal((await fetch(`${fn.url}/healthz`)).status, 200);
    // The StorageClass copy starts with the process: the first burst of reviews finds it synced.
    await eventually("the StorageClass copy's list and watch, made at start", async () => {
      const c = await sandbox.admin.counters();
      return c["list storageclasses"] === 1 && c["watch storageclasses"] === 1 ? true : undefined;
    });
    const original = claim("data");
    const r = review("persistentvolumeclaims", "CREATE", original);
    const res = await fetch(`${fn.url}/mutate/persistentvolumeclaims`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(r),
    });
    assert.equal(res.status, 200);
    const answer = (await res.json()) as { response: Parameters<typeof patched>[1] };
    assert.equal(answer.response.uid, r.request.uid);
    const out = patched(original, answer.response);
    assert.equal(out.spec.storageClassName, "fast");
    assert.deepEqual(out.metadata.finalizers, [
      "kubernetes.io/pvc-protection",
      "storage.kube-storage-functions.io/provisioning",
    ]);
    const metrics = await (await fetch(`${fn.url}/metrics`)).text();
    assert.match(metrics, /admission_lookups_total\{resource="storageclasses",result="copy"\} 1/);
    const after = await sandbox.admin.counters();
    assert.equal(after["list storageclasses"], 1, "the review read the copy, not the API");
  } finally {
    assert.equal(await fn.stop(), 0, fn.stderr());
  }
});

test("a bad setting stops the process at start with a clear message", async () => {
  await assert.rejects(
    startFunctionProcess("admission", {
      KUBECONFIG: sandbox.kubeconfigPath,
      ADMISSION_FAILURE_POLICY_VALIDATE_VA: "sometimes",
    }),
    /ADMISSION_FAILURE_POLICY_VALIDATE_VA must be Ignore or Fail/,
  );
});
