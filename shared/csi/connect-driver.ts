// How a function that talks to a CSI driver starts (provisioner, attacher;
// container and Lambda alike): connect to CSI_ENDPOINT with the
// CSI_TIMEOUT_SECONDS deadline, make sure it is the driver DRIVER_NAME names,
// and that it can do what the function is for. Any failure refuses the start
// (serving the wrong driver's objects is worse than not starting) and closes
// the client, so a Lambda retrying its cold start does not leak channels.
// Only a transient answer (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED) is tried
// again, a few times: one blip of the driver should not cost a restart.

import { type Env, positiveIntegerFromEnv } from "../config.ts";
import { retrying } from "../retry.ts";
import type { CsiCapabilities } from "./capabilities.ts";
import { CsiClient } from "./client.ts";
import { csiEndpointFromEnv } from "./endpoint.ts";
import { GrpcCode, grpcCodeOf } from "./errors.ts";

const transientCodes: ReadonlySet<number | undefined> = new Set([
  GrpcCode.UNAVAILABLE,
  GrpcCode.DEADLINE_EXCEEDED,
  GrpcCode.ABORTED,
]);

export interface ConnectDriverOptions {
  env: Env;
  /** CSI_TIMEOUT_SECONDS when unset: the upstream sidecar's --timeout default. */
  defaultTimeoutSeconds: number;
  /**
   * Why the function has nothing to do with this driver, or undefined when it
   * has. The answer completes "driver <name> …", e.g. "does not support X".
   */
  require?: (capabilities: CsiCapabilities) => string | undefined;
  /** Attempts when the driver answers a transient error. Default 5. */
  attempts?: number;
  /** Wait before the second attempt, doubling after; default 200 ms. */
  retryDelayMs?: number;
}

export interface ConnectedDriver {
  csi: CsiClient;
  /** What the driver calls itself (GetPluginInfo), which DRIVER_NAME, if set, matched. */
  driverName: string;
  capabilities: CsiCapabilities;
}

export async function connectDriver(options: ConnectDriverOptions): Promise<ConnectedDriver> {
  const retryDelayMs = options.retryDelayMs ?? 200;
  return retrying(() => connectOnce(options), {
    maxAttempts: options.attempts ?? 5,
    // Waits of retryDelayMs·2^(n-1) to twice that (jittered), at most 5 s.
    baseDelayMs: 2 * retryDelayMs,
    maxDelayMs: 5000,
    retryable: (err) => transientCodes.has(grpcCodeOf(err)),
  });
}

async function connectOnce(options: ConnectDriverOptions): Promise<ConnectedDriver> {
  const { env } = options;
  const timeoutSeconds = positiveIntegerFromEnv(env, "CSI_TIMEOUT_SECONDS", options.defaultTimeoutSeconds);
  const csi = new CsiClient({ endpoint: csiEndpointFromEnv(env), timeoutMs: timeoutSeconds * 1000 });
  try {
    // Probe, identity and capabilities asked at once: a round trip less in every
    // cold start. What they answer describes the driver, not its readiness, so
    // answers given while it was still starting stand; calls it failed then are
    // asked again once Probe has said ready. The capabilities are cached by
    // the client, so the function's own later reads cost nothing.
    const identity = () => Promise.all([csi.getPluginInfo(), csi.capabilities()]);
    const early = identity();
    // Judged after Probe; a failure before then must not surface as unhandled.
    early.catch(() => undefined);
    await csi.probe();
    const [info, capabilities] = await early.catch(identity);
    const driverName = info.name;
    const wanted = env.DRIVER_NAME?.trim();
    if (wanted && wanted !== driverName) {
      throw new Error(`DRIVER_NAME is ${wanted} but the driver at CSI_ENDPOINT is ${driverName}`);
    }
    const missing = options.require?.(capabilities);
    if (missing !== undefined) throw new Error(`driver ${driverName} ${missing}`);
    return { csi, driverName, capabilities };
  } catch (err) {
    csi.close();
    throw err;
  }
}
