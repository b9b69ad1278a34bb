// shared/csi/connect-driver.ts against the sandbox CSI driver: what the
// provisioner and attacher check before they serve.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { connectDriver } from "../../shared/csi/connect-driver.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

let sandbox: TestSandbox;
before(async () => {
  sandbox = await startTestSandbox();
});
after(async () => {
  await sandbox.close();
});

test("connects, names the driver and reads its capabilities", async () => {
  const { csi, driverName, capabilities } = await connectDriver({
    env: { CSI_ENDPOINT: sandbox.csiEndpoint, DRIVER_NAME: "hostpath.csi.k8s.io", CSI_TIMEOUT_SECONDS: "3" },
    defaultTimeoutSeconds: 10,
  });
  try {
    assert.equal(driverName, "hostpath.csi.k8s.io");
    assert.equal(csi.timeoutMs, 3000);
    assert.equal(capabilities.controllerService, true);
  } finally {
    csi.close();
  }
});

test("refuses another driver than DRIVER_NAME, a missing capability and a bad timeout", async () => {
  const env = { CSI_ENDPOINT: sandbox.csiEndpoint };
  await assert.rejects(
    connectDriver({ env: { ...env, DRIVER_NAME: "other.example.com" }, defaultTimeoutSeconds: 10 }),
    {
      message: "DRIVER_NAME is other.example.com but the driver at CSI_ENDPOINT is hostpath.csi.k8s.io",
    },
  );
  await assert.rejects(
    connectDriver({
      env,
      defaultTimeoutSeconds: 10,
      require: () => "does not support NOTHING; nothing to do",
    }),
    { message: "driver hostpath.csi.k8s.io does not support NOTHING; nothing to do" },
  );
  await assert.rejects(
    connectDriver({ env: { ...env, CSI_TIMEOUT_SECONDS: "0" }, defaultTimeoutSeconds: 10 }),
    {
      message: 'CSI_TIMEOUT_SECONDS must be a positive integer, got "0"',
    },
  );
});

test("tries again when the driver answers UNAVAILABLE at start, and gives up after the attempts", async () => {
  const env = { CSI_ENDPOINT: sandbox.csiEndpoint, DRIVER_NAME: "hostpath.csi.k8s.io" };
  const methods = ["GetPluginInfo", "GetPluginCapabilities", "ControllerGetCapabilities"];
  await sandbox.csi.resetStats();
  // Seeded: of the first calls some fail, and 20 attempts cannot all meet a failure at 50 %.
  await sandbox.csi.setFaults({ errorProbability: 0.5, errorCodes: ["UNAVAILABLE"], methods, seed: 7 });
  try {
    const { csi, driverName } = await connectDriver({
      env,
      defaultTimeoutSeconds: 10,
      attempts: 20,
      retryDelayMs: 1,
    });
    csi.close();
    assert.equal(driverName, "hostpath.csi.k8s.io");
    const calls = (await sandbox.csi.stats()).calls;
    assert.ok((calls.GetPluginInfo ?? 0) + (calls.GetPluginCapabilities ?? 0) > 2, JSON.stringify(calls));
    await sandbox.csi.setFaults({ errorProbability: 1, errorCodes: ["UNAVAILABLE"], methods });
    await assert.rejects(
      connectDriver({ env, defaultTimeoutSeconds: 10, attempts: 3, retryDelayMs: 1 }),
      (err) => {
        assert.match(String(err), /UNAVAILABLE|unavailable/i);
        return true;
      },
    );
  } finally {
    await sandbox.csi.clearFaults();
  }
});

test("a driver still starting: identity calls it failed before Probe said ready are asked again after it", async () => {
  const env = { CSI_ENDPOINT: sandbox.csiEndpoint, DRIVER_NAME: "hostpath.csi.k8s.io" };
  const methods = ["GetPluginInfo", "GetPluginCapabilities"];
  await sandbox.csi.resetStats();
  await sandbox.csi.setReady(false);
  await sandbox.csi.setFaults({ errorProbability: 1, errorCodes: ["UNAVAILABLE"], methods });
  try {
    // One attempt only: the wait for readiness, not the outer retry, must carry it.
    const connecting = connectDriver({ env, defaultTimeoutSeconds: 10, attempts: 1 });
    let settled = false;
    void connecting.finally(() => {
      settled = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(settled, false, "not connected while the driver is not ready");
    const early = (await sandbox.csi.stats()).calls;
    assert.equal(early.GetPluginInfo, 1, JSON.stringify(early));
    await sandbox.csi.clearFaults();
    await sandbox.csi.setReady(true);
    const { csi, driverName, capabilities } = await connecting;
    csi.close();
    assert.equal(driverName, "hostpath.csi.k8s.io");
    assert.equal(capabilities.controllerService, true);
    const calls = (await sandbox.csi.stats()).calls;
    assert.equal(calls.GetPluginInfo, 2, JSON.stringify(calls));
    assert.ok((calls.Probe ?? 0) >= 2, JSON.stringify(calls));
  } finally {
    await sandbox.csi.clearFaults();
    await sandbox.csi.setReady(true);
  }
});
