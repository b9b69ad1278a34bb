// Upstream's control plane on the same server, for the comparison mode:
// kube-controller-manager with only the storage controllers ours replace
// (persistentvolume-binder, pvc-protection, pv-protection),
// csi-provisioner and csi-attacher, with the rate limits raised the way the
// issue's "tuned" column ran them (QPS 100, burst 200, 100 workers; their
// defaults with --upstream-defaults), and the hostpath CSI driver (attach
// enabled, so the attacher has work to do).

import { access, constants, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { progress } from "../support.ts";
import type { UpstreamBinaries } from "./options.ts";
import type { Stack, StackOptions } from "./ours.ts";
import { type Child, pollUntil, startChild } from "./processes.ts";

/** The controllers ours replace, attachdetach aside as on our side (ours.ts BENCH_FUNCTIONS). */
export const UPSTREAM_CONTROLLERS = "persistentvolume-binder,pvc-protection,pv-protection";
const TUNING = ["--kube-api-qps=100", "--kube-api-burst=200"];
const SIDECAR_TUNING = [...TUNING, "--worker-threads=100"];

async function executable(path: string, what: string): Promise<void> {
  try {
    await access(path, constants.X_OK);
  } catch {
    throw new Error(
      `${what} not found at ${path} (bash ../shared/real-cluster/build.sh builds it; or give its path, see npm run bench:real -- --help)`,
    );
  }
}

export async function startUpstreamStack(
  options: StackOptions,
  bins: UpstreamBinaries,
  defaults = false,
): Promise<Stack> {
  await executable(bins.kubeControllerManager, "kube-controller-manager");
  await executable(bins.csiProvisioner, "csi-provisioner");
  await executable(bins.csiAttacher, "csi-attacher");
  await executable(bins.hostpathPlugin, "hostpathplugin");
  const stateDir = join(options.dir, "hostpath");
  await mkdir(stateDir, { recursive: true });
  const socket = join(options.dir, "hostpath.sock");
  const children: Child[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(children.map((c) => c.stop()));
  };
  try {
    const driver = startChild(
      "hostpathplugin",
      bins.hostpathPlugin,
      [
        `--endpoint=unix://${socket}`,
        `--drivername=${options.driverName}`,
        `--nodeid=${options.nodeId}`,
        `--statedir=${stateDir}`,
        "--enable-attach=true",
        "--v=1",
      ],
      {},
    );
    children.push(driver);
    await pollUntil(
      "the hostpath driver's socket",
      async () => {
        await access(socket);
        return true;
      },
      30_000,
      driver,
    );
    const kcm = startChild(
      "kube-controller-manager",
      bins.kubeControllerManager,
      [
        `--kubeconfig=${options.kubeconfig}`,
        `--controllers=${UPSTREAM_CONTROLLERS}`,
        "--leader-elect=false",
        "--use-service-account-credentials=false",
        "--port=0",
        "--secure-port=0",
        ...(defaults ? [] : TUNING),
        "--v=1",
      ],
      {},
    );
    const provisioner = startChild(
      "csi-provisioner",
      bins.csiProvisioner,
      [
        `--csi-address=${socket}`,
        `--kubeconfig=${options.kubeconfig}`,
        "--leader-election=false",
        ...(defaults ? [] : SIDECAR_TUNING),
        "--v=2",
      ],
      {},
    );
    const attacher = startChild(
      "csi-attacher",
      bins.csiAttacher,
      [
        `--csi-address=${socket}`,
        `--kubeconfig=${options.kubeconfig}`,
        "--leader-election=false",
        ...(defaults ? [] : SIDECAR_TUNING),
        "--v=2",
      ],
      {},
    );
    children.push(kcm, provisioner, attacher);
    // Each is ready once its informers have synced (client-go logs it).
    await Promise.all([
      kcm.waitForOutput(/Caches are synced for persistent volume/, 120_000),
      provisioner.waitForOutput(/Started provisioner controller/, 120_000),
      attacher.waitForOutput(
        /Caches are synced for (VolumeAttachment|volumeattachment)|Starting CSI attacher/i,
        120_000,
      ),
    ]);
    progress(
      "upstream: kube-controller-manager, csi-provisioner, csi-attacher and the hostpath driver are up",
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    name: "upstream",
    csiEndpoint: `unix://${socket}`,
    diagnostics: () => Object.fromEntries(children.map((c) => [c.name, c.output().slice(-2000)])),
    processes: () => children.map((c) => ({ name: c.name, pid: c.child.pid })),
    stop,
  };
}
