// The external-provisioner's flags that change what is provisioned, as
// options of one provisioner function (environment variables in main.ts).
import { type RetryInterval, upstreamRetryInterval } from "../kube/retry-interval.ts";

export interface ProvisionerOptions {
  /** --volume-name-prefix (default "pvc"). */
  volumeNamePrefix: string;
  /** --volume-name-uuid-length (default -1: the whole uid). */
  volumeNameUuidLength: number;
  /** --default-fstype (default ""). */
  defaultFsType: string;
  /** --extra-create-metadata (default false): pvc/pv names as CreateVolume parameters. */
  extraCreateMetadata: boolean;
  /** --strict-topology (default false). */
  strictTopology: boolean;
  /** --immediate-topology (default true). */
  immediateTopology: boolean;
  /** storage.kubernetes.io/csiProvisionerIdentity on every PV; stable, since this provisioner has no instance. */
  identity: string;
  /** --retry-interval-start / --retry-interval-max: the backoff written on a claim whose provisioning failed. */
  retryInterval: RetryInterval;
  /** --controller-publish-readonly (default false): a PV for a ReadOnlyMany-only claim gets spec.csi.readOnly. */
  controllerPublishReadOnly: boolean;
}

export function defaultProvisionerOptions(driverName: string): ProvisionerOptions {
  return {
    volumeNamePrefix: "pvc",
    volumeNameUuidLength: -1,
    defaultFsType: "",
    extraCreateMetadata: false,
    strictTopology: false,
    immediateTopology: true,
    identity: `kube-storage-functions-${driverName}`,
    retryInterval: upstreamRetryInterval,
    controllerPublishReadOnly: false,
  };
}
