// The CSI driver as part of the sandbox: `npm run sandbox` announces a
// working csiEndpoint and csiAdmin, and the test sandbox exposes both.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { it } from "node:test";
import { mountCap, rawCsiClient, rejectsWith } from "../helpers/csi-driver-client.ts";
import { startTestSandbox } from "../helpers/sandbox.ts";

it("npm run sandbox prints a ready line whose csiEndpoint answers CSI calls", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-sandbox-csi-"));
  const child = spawn(process.execPath, ["sandbox/main.ts"], {
    env: { ...process.env, SANDBOX_PORT: "0", SANDBOX_DIR: dir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  try {
    const line = await new Promise<string>((resolve, reject) => {
      child.once("exit", (code) => reject(new Error(`sandbox exited early with ${code}`)));
      createInterface({ input: child.stdout! }).once("line", resolve);
    });
    const ready = JSON.parse(line) as Record<string, string>;
    assert.equal(ready.ready, true as never);
    assert.match(ready.apiServer!, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(ready.kubeconfig, join(dir, "kubeconfig"));
    assert.equal(ready.csiEndpoint, `unix://${join(dir, "csi", "csi.sock")}`);
    assert.match(ready.csiAdmin!, /^http:\/\/127\.0\.0\.1:\d+$/);

    const csi = rawCsiClient(ready.csiEndpoint!);
    try {
      assert.equal((await csi.call("Identity", "GetPluginInfo")).name, "hostpath.csi.k8s.io");
      await csi.call("Controller", "CreateVolume", {
        name: "pvc-from-sandbox",
        capacity_range: { required_bytes: 1024 },
        volume_capabilities: [mountCap()],
      });
    } finally {
      csi.close();
    }
    const admin = (await (await fetch(`${ready.csiAdmin}/volumes`)).json()) as {
      volumes: { name: string }[];
    };
    assert.deepEqual(
      admin.volumes.map((v) => v.name),
      ["pvc-from-sandbox"],
    );
  } finally {
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    assert.equal(await exited, 0);
    await assert.rejects(stat(join(dir, "csi", "csi.sock")), { code: "ENOENT" });
    await rm(dir, { recursive: true, force: true });
  }
});

it("startTestSandbox exposes csiEndpoint and the csi admin helper, and takes driver options", async () => {
  const sandbox = await startTestSandbox({
    csi: { controllerCapabilities: ["CREATE_DELETE_VOLUME", "LIST_VOLUMES"] },
  });
  const csi = rawCsiClient(sandbox.csiEndpoint);
  try {
    const caps = await csi.call<{ capabilities: { rpc: { type: string } }[] }>(
      "Controller",
      "ControllerGetCapabilities",
    );
    assert.deepEqual(
      caps.capabilities.map((c) => c.rpc.type),
      ["CREATE_DELETE_VOLUME", "LIST_VOLUMES"],
    );
    await sandbox.csi.setFaults({ errorProbability: 1, errorCodes: ["UNAVAILABLE"], afterProbability: 1 });
    await rejectsWith(
      csi.call("Controller", "CreateVolume", { name: "v", volume_capabilities: [mountCap()] }),
      "UNAVAILABLE",
    );
    await sandbox.csi.clearFaults();
    assert.deepEqual(
      (await sandbox.csi.volumes()).map((v) => v.name),
      ["v"],
    );
    assert.equal((await sandbox.csi.stats()).calls.CreateVolume, 1);
  } finally {
    csi.close();
    await sandbox.close();
  }
});
