// CsiClient: the typed gRPC client of one CSI driver, over one grpc-js
// channel (unix socket or TCP, insecure credentials as the sidecars use).
//
// Every call
//   - has a deadline (default 10 s, the sidecars' --timeout), overridable per call;
//   - can be cancelled with an AbortSignal (-> CANCELLED, "in progress");
//   - is recorded in csi_sidecar_operations_seconds;
//   - is logged at debug level with secrets stripped, when a logger is given;
//   - fails with a CsiError (code, details, metadata) for any gRPC status.
//
// The client is meant to live as long as the process: plugin and controller
// capabilities are fetched once and cached (a failed fetch is not cached).

import { setTimeout as sleep } from "node:timers/promises";
import type { ChannelOptions, ServiceError } from "@grpc/grpc-js";
import { Client, credentials, Metadata } from "@grpc/grpc-js";
import type { Histogram } from "prom-client";
import type { Registry } from "../metrics.ts";
import type { CsiCapabilities } from "./capabilities.ts";
import { capabilitiesFrom } from "./capabilities.ts";
import type { CsiEndpoint } from "./endpoint.ts";
import { parseCsiEndpoint } from "./endpoint.ts";
import { CsiError, GrpcCode, grpcCodeOf, toCsiError } from "./errors.ts";
import type { CsiOperationLabel } from "./metrics.ts";
import { csiOperationsHistogram, recordCsiOperation } from "./metrics.ts";
import type { CsiServiceName } from "./proto.ts";
import { csiMethod } from "./proto.ts";
import { redactSecrets } from "./redact.ts";
import type {
  ControllerExpandVolumeRequest,
  ControllerExpandVolumeResponse,
  ControllerGetCapabilitiesResponse,
  ControllerModifyVolumeRequest,
  ControllerModifyVolumeResponse,
  ControllerPublishVolumeRequest,
  ControllerPublishVolumeResponse,
  ControllerUnpublishVolumeRequest,
  ControllerUnpublishVolumeResponse,
  CreateSnapshotRequest,
  CreateSnapshotResponse,
  CreateVolumeRequest,
  CreateVolumeResponse,
  DeleteSnapshotRequest,
  DeleteSnapshotResponse,
  DeleteVolumeRequest,
  DeleteVolumeResponse,
  GetCapacityRequest,
  GetCapacityResponse,
  GetPluginCapabilitiesResponse,
  GetPluginInfoResponse,
  ListSnapshotsRequest,
  ListSnapshotsResponse,
  ListVolumesRequest,
  ListVolumesResponse,
  NodeExpandVolumeRequest,
  NodeExpandVolumeResponse,
  NodeGetCapabilitiesResponse,
  NodeGetInfoResponse,
  NodePublishVolumeRequest,
  NodePublishVolumeResponse,
  NodeStageVolumeRequest,
  NodeStageVolumeResponse,
  NodeUnpublishVolumeRequest,
  NodeUnpublishVolumeResponse,
  NodeUnstageVolumeRequest,
  NodeUnstageVolumeResponse,
  ProbeResponse,
  ValidateVolumeCapabilitiesRequest,
  ValidateVolumeCapabilitiesResponse,
} from "./types.ts";
import { fromWire, toWire } from "./wire.ts";

export const DEFAULT_CSI_TIMEOUT_MS = 10_000;
export const DEFAULT_PROBE_READY_TIMEOUT_MS = 30_000;
export const DEFAULT_PROBE_INTERVAL_MS = 1_000;

// grpc-js backs off up to 2 minutes between reconnects by default; a driver
// that restarts (or starts after us) should be reached within a second, as
// csi-lib-utils does for the sidecars.
const DEFAULT_CHANNEL_OPTIONS: ChannelOptions = {
  "grpc.initial_reconnect_backoff_ms": 100,
  "grpc.max_reconnect_backoff_ms": 1_000,
};

/** The part of a pino Logger the client uses. */
export interface CsiCallLogger {
  debug(fields: object, message: string): void;
}

export interface CsiClientOptions {
  /** CSI_ENDPOINT syntax or an already parsed endpoint. */
  endpoint: string | CsiEndpoint;
  /** Deadline of each call, milliseconds. Default 10 s. */
  timeoutMs?: number;
  /** driver_name metric label; otherwise learned from GetPluginInfo ("" before). */
  driverName?: string;
  /** Where csi_sidecar_operations_seconds goes; default the process registry. */
  registry?: Registry;
  logger?: CsiCallLogger;
  /** Extra grpc-js channel options (merged over ours). */
  channelOptions?: ChannelOptions;
}

export interface CsiCallOptions {
  /** Overrides the client's deadline for this call. */
  timeoutMs?: number;
  /** Aborting cancels the call (gRPC CANCELLED). */
  signal?: AbortSignal;
}

export interface ProbeOptions {
  /**
   * Start no new probe after this long without a ready answer. Default 30 s.
   * The wait can exceed it by one call deadline (the last probe in flight).
   */
  readyTimeoutMs?: number;
  /** Pause between probes. Default 1 s, as the sidecars. */
  intervalMs?: number;
}

function checkTimeout(name: string, ms: number): number {
  if (!Number.isFinite(ms) || ms <= 0)
    throw new RangeError(`${name} must be a positive number of ms, got ${ms}`);
  return ms;
}

export class CsiClient {
  readonly endpoint: CsiEndpoint;
  readonly timeoutMs: number;
  private readonly channel: Client;
  private readonly metric: Histogram<CsiOperationLabel>;
  private readonly logger: CsiCallLogger | undefined;
  private driverLabel: string | undefined;
  private pluginInfoValue: GetPluginInfoResponse | undefined;
  private capabilitiesCache: Promise<CsiCapabilities> | undefined;

  /**
   * A client that probes the driver until it is ready (bounded) and reads its
   * plugin info, as the sidecars do at start. Closed again if that fails.
   */
  static async connect(options: CsiClientOptions & { probe?: ProbeOptions }): Promise<CsiClient> {
    const client = new CsiClient(options);
    try {
      await client.probe(options.probe);
      await client.getPluginInfo();
      return client;
    } catch (err) {
      client.close();
      throw err;
    }
  }

  constructor(options: CsiClientOptions) {
    this.endpoint =
      typeof options.endpoint === "string" ? parseCsiEndpoint(options.endpoint) : options.endpoint;
    this.timeoutMs = checkTimeout("timeoutMs", options.timeoutMs ?? DEFAULT_CSI_TIMEOUT_MS);
    this.driverLabel = options.driverName;
    this.logger = options.logger;
    this.metric = csiOperationsHistogram(options.registry);
    this.channel = new Client(this.endpoint.target, credentials.createInsecure(), {
      ...DEFAULT_CHANNEL_OPTIONS,
      ...options.channelOptions,
    });
  }

  /** The driver name: given in the options, or from the last GetPluginInfo. */
  get driverName(): string | undefined {
    return this.driverLabel;
  }

  /** The answer of the last GetPluginInfo (connect() makes one). */
  get pluginInfo(): GetPluginInfoResponse | undefined {
    return this.pluginInfoValue;
  }

  close(): void {
    this.channel.close();
  }

  // ---- Identity ------------------------------------------------------------

  async getPluginInfo(options?: CsiCallOptions): Promise<GetPluginInfoResponse> {
    const info = await this.call<GetPluginInfoResponse>("Identity", "GetPluginInfo", {}, options);
    this.pluginInfoValue = info;
    this.driverLabel ??= info.name;
    return info;
  }

  getPluginCapabilities(options?: CsiCallOptions): Promise<GetPluginCapabilitiesResponse> {
    return this.call("Identity", "GetPluginCapabilities", {}, options);
  }

  /** One Probe call: true when ready (an absent `ready` means ready). */
  async probeOnce(options?: CsiCallOptions): Promise<boolean> {
    const answer = await this.call<ProbeResponse>("Identity", "Probe", {}, options);
    return answer.ready?.value ?? true;
  }

  /**
   * Probes until the driver answers ready. Keeps trying while it answers
   * not-ready, is unreachable (UNAVAILABLE: socket not there yet) or too slow
   * (DEADLINE_EXCEEDED); any other error ends the wait at once. After
   * `readyTimeoutMs` it fails with a CsiError UNAVAILABLE, which the HTTP
   * layer answers with 503.
   */
  async probe(options: ProbeOptions = {}): Promise<void> {
    const budget = checkTimeout("readyTimeoutMs", options.readyTimeoutMs ?? DEFAULT_PROBE_READY_TIMEOUT_MS);
    const interval = checkTimeout("intervalMs", options.intervalMs ?? DEFAULT_PROBE_INTERVAL_MS);
    const giveUpAt = Date.now() + budget;
    let attempts = 0;
    let last = "";
    for (;;) {
      attempts++;
      try {
        // Each probe gets the full call deadline (a shortened one would only
        // turn "not ready" into a misleading DeadlineExceeded at the end).
        if (await this.probeOnce()) return;
        last = "the driver answered not ready";
      } catch (err) {
        const code = grpcCodeOf(err);
        if (code !== GrpcCode.UNAVAILABLE && code !== GrpcCode.DEADLINE_EXCEEDED) throw err;
        last = err instanceof Error ? err.message : String(err);
      }
      const left = giveUpAt - Date.now();
      if (left <= 0) break;
      await sleep(Math.min(interval, left));
    }
    throw new CsiError(
      csiMethod("Identity", "Probe").path,
      GrpcCode.UNAVAILABLE,
      `CSI driver at ${this.endpoint.address} not ready after ${attempts} probes in ${budget} ms: ${last}`,
    );
  }

  /**
   * Plugin and controller capabilities, fetched once per client. Controller
   * capabilities are only asked for when the plugin has a controller service
   * (a node-only driver would answer UNIMPLEMENTED).
   */
  capabilities(): Promise<CsiCapabilities> {
    if (this.capabilitiesCache === undefined) {
      const pending = this.fetchCapabilities();
      this.capabilitiesCache = pending;
      // Do not cache a failure: the next caller asks the driver again.
      pending.catch(() => {
        if (this.capabilitiesCache === pending) this.capabilitiesCache = undefined;
      });
    }
    return this.capabilitiesCache;
  }

  private async fetchCapabilities(): Promise<CsiCapabilities> {
    const plugin = (await this.getPluginCapabilities()).capabilities;
    const hasController = plugin.some((c) => c.service?.type === "CONTROLLER_SERVICE");
    const controller = hasController ? (await this.controllerGetCapabilities()).capabilities : [];
    return capabilitiesFrom(plugin, controller);
  }

  // ---- Controller ----------------------------------------------------------

  createVolume(request: CreateVolumeRequest, options?: CsiCallOptions): Promise<CreateVolumeResponse> {
    return this.call("Controller", "CreateVolume", request, options);
  }

  deleteVolume(request: DeleteVolumeRequest, options?: CsiCallOptions): Promise<DeleteVolumeResponse> {
    return this.call("Controller", "DeleteVolume", request, options);
  }

  controllerPublishVolume(
    request: ControllerPublishVolumeRequest,
    options?: CsiCallOptions,
  ): Promise<ControllerPublishVolumeResponse> {
    return this.call("Controller", "ControllerPublishVolume", request, options);
  }

  controllerUnpublishVolume(
    request: ControllerUnpublishVolumeRequest,
    options?: CsiCallOptions,
  ): Promise<ControllerUnpublishVolumeResponse> {
    return this.call("Controller", "ControllerUnpublishVolume", request, options);
  }

  validateVolumeCapabilities(
    request: ValidateVolumeCapabilitiesRequest,
    options?: CsiCallOptions,
  ): Promise<ValidateVolumeCapabilitiesResponse> {
    return this.call("Controller", "ValidateVolumeCapabilities", request, options);
  }

  /** One page; pass `nextToken` back as `startingToken` until it is "". */
  listVolumes(request: ListVolumesRequest = {}, options?: CsiCallOptions): Promise<ListVolumesResponse> {
    return this.call("Controller", "ListVolumes", request, options);
  }

  getCapacity(request: GetCapacityRequest = {}, options?: CsiCallOptions): Promise<GetCapacityResponse> {
    return this.call("Controller", "GetCapacity", request, options);
  }

  controllerGetCapabilities(options?: CsiCallOptions): Promise<ControllerGetCapabilitiesResponse> {
    return this.call("Controller", "ControllerGetCapabilities", {}, options);
  }

  createSnapshot(request: CreateSnapshotRequest, options?: CsiCallOptions): Promise<CreateSnapshotResponse> {
    return this.call("Controller", "CreateSnapshot", request, options);
  }

  deleteSnapshot(request: DeleteSnapshotRequest, options?: CsiCallOptions): Promise<DeleteSnapshotResponse> {
    return this.call("Controller", "DeleteSnapshot", request, options);
  }

  listSnapshots(
    request: ListSnapshotsRequest = {},
    options?: CsiCallOptions,
  ): Promise<ListSnapshotsResponse> {
    return this.call("Controller", "ListSnapshots", request, options);
  }

  controllerExpandVolume(
    request: ControllerExpandVolumeRequest,
    options?: CsiCallOptions,
  ): Promise<ControllerExpandVolumeResponse> {
    return this.call("Controller", "ControllerExpandVolume", request, options);
  }

  controllerModifyVolume(
    request: ControllerModifyVolumeRequest,
    options?: CsiCallOptions,
  ): Promise<ControllerModifyVolumeResponse> {
    return this.call("Controller", "ControllerModifyVolume", request, options);
  }

  // ---- Node ----------------------------------------------------------------

  nodeGetInfo(options?: CsiCallOptions): Promise<NodeGetInfoResponse> {
    return this.call("Node", "NodeGetInfo", {}, options);
  }

  nodeExpandVolume(
    request: NodeExpandVolumeRequest,
    options?: CsiCallOptions,
  ): Promise<NodeExpandVolumeResponse> {
    return this.call("Node", "NodeExpandVolume", request, options);
  }

  nodeGetCapabilities(options?: CsiCallOptions): Promise<NodeGetCapabilitiesResponse> {
    return this.call("Node", "NodeGetCapabilities", {}, options);
  }

  nodeStageVolume(
    request: NodeStageVolumeRequest,
    options?: CsiCallOptions,
  ): Promise<NodeStageVolumeResponse> {
    return this.call("Node", "NodeStageVolume", request, options);
  }

  nodeUnstageVolume(
    request: NodeUnstageVolumeRequest,
    options?: CsiCallOptions,
  ): Promise<NodeUnstageVolumeResponse> {
    return this.call("Node", "NodeUnstageVolume", request, options);
  }

  nodePublishVolume(
    request: NodePublishVolumeRequest,
    options?: CsiCallOptions,
  ): Promise<NodePublishVolumeResponse> {
    return this.call("Node", "NodePublishVolume", request, options);
  }

  nodeUnpublishVolume(
    request: NodeUnpublishVolumeRequest,
    options?: CsiCallOptions,
  ): Promise<NodeUnpublishVolumeResponse> {
    return this.call("Node", "NodeUnpublishVolume", request, options);
  }

  // ---- plumbing ------------------------------------------------------------

  private call<Res>(
    service: CsiServiceName,
    method: string,
    request: object,
    options: CsiCallOptions = {},
  ): Promise<Res> {
    const definition = csiMethod(service, method);
    const path = definition.path;
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      return Promise.reject(new RangeError(`timeoutMs must be a positive number of ms, got ${timeoutMs}`));
    }
    const started = performance.now();
    this.logger?.debug({ method: path, request: redactSecrets(request) }, "CSI call");

    return new Promise<Res>((resolve, reject) => {
      const record = (code: number | undefined): void => {
        const seconds = (performance.now() - started) / 1000;
        recordCsiOperation(this.metric, { driverName: this.driverLabel ?? "", method: path, code, seconds });
      };
      const fail = (err: unknown): void => {
        const wrapped = toCsiError(path, err);
        record(grpcCodeOf(wrapped));
        this.logger?.debug({ method: path, err: wrapped }, "CSI call failed");
        reject(wrapped);
      };

      const { signal } = options;
      if (signal?.aborted) {
        fail(new CsiError(path, GrpcCode.CANCELLED, "cancelled before the call was sent"));
        return;
      }
      let onAbort: (() => void) | undefined;
      const callback = (err: ServiceError | null, value?: object): void => {
        if (onAbort) signal?.removeEventListener("abort", onAbort);
        if (err) {
          fail(err);
          return;
        }
        let response: Res;
        try {
          response = fromWire<Res>(definition.responseTypeName, value);
        } catch (decodeError) {
          fail(decodeError);
          return;
        }
        record(GrpcCode.OK);
        this.logger?.debug({ method: path, response: redactSecrets(response) }, "CSI call succeeded");
        resolve(response);
      };
      try {
        const call = this.channel.makeUnaryRequest(
          path,
          definition.requestSerialize,
          definition.responseDeserialize,
          toWire(request),
          new Metadata(),
          { deadline: Date.now() + timeoutMs },
          callback,
        );
        if (signal) {
          onAbort = () => call.cancel();
          signal.addEventListener("abort", onAbort, { once: true });
        }
      } catch (err) {
        // E.g. the channel was closed: not a gRPC status, recorded as Unknown.
        fail(err);
      }
    });
  }
}
