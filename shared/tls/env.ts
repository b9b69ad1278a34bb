// TLS configuration of a function process from its environment:
//
//   TLS_CERT_FILE + TLS_KEY_FILE                 PEM files (e.g. a mounted kubernetes.io/tls Secret)
//   TLS_SECRET_NAME + TLS_SECRET_NAMESPACE       read the Secret through the API (KUBECONFIG / service account)
//   TLS_RELOAD_INTERVAL_SECONDS                  poll period (default 10 for files, 60 for a Secret)
//
// Nothing set: plain HTTP (behind Knative's own TLS, or local use). Half a
// pair set is an error at start, never a silent fallback to HTTP.

import { loadKubeConfig } from "../kube/client.ts";
import { KubeJsonClient } from "../kube/json-client.ts";
import { type SecretReader, TlsConfigError, type TlsSource } from "./serving.ts";

export type Env = Record<string, string | undefined>;

export interface TlsFromEnv {
  source: TlsSource;
  reloadIntervalMs?: number;
  /** Releases what the configuration opened (the API client for a Secret source). */
  close(): Promise<void>;
}

function value(env: Env, name: string): string | undefined {
  const raw = env[name]?.trim();
  return raw === undefined || raw === "" ? undefined : raw;
}

export interface TlsFromEnvOptions {
  /** The client for a Secret source; defaults to one built from KUBECONFIG or the service account. */
  kube?: () => SecretReader & { close?(): Promise<void> };
}

export function tlsFromEnv(env: Env = process.env, options: TlsFromEnvOptions = {}): TlsFromEnv | undefined {
  const certFile = value(env, "TLS_CERT_FILE");
  const keyFile = value(env, "TLS_KEY_FILE");
  const secretName = value(env, "TLS_SECRET_NAME");
  const secretNamespace = value(env, "TLS_SECRET_NAMESPACE");
  const interval = value(env, "TLS_RELOAD_INTERVAL_SECONDS");
  let reloadIntervalMs: number | undefined;
  if (interval !== undefined) {
    if (!/^\d+$/.test(interval) || Number(interval) < 1 || Number(interval) > 86_400)
      throw new TlsConfigError(
        `TLS_RELOAD_INTERVAL_SECONDS must be 1..86400, got ${JSON.stringify(interval)}`,
      );
    reloadIntervalMs = Number(interval) * 1000;
  }
  const files = certFile !== undefined || keyFile !== undefined;
  const secret = secretName !== undefined || secretNamespace !== undefined;
  if (files && secret)
    throw new TlsConfigError(
      "set either TLS_CERT_FILE/TLS_KEY_FILE or TLS_SECRET_NAME/TLS_SECRET_NAMESPACE, not both",
    );
  const extra = reloadIntervalMs === undefined ? {} : { reloadIntervalMs };
  if (files) {
    if (certFile === undefined || keyFile === undefined)
      throw new TlsConfigError("TLS_CERT_FILE and TLS_KEY_FILE must be set together");
    return { source: { certFile, keyFile }, ...extra, close: async () => {} };
  }
  if (secret) {
    if (secretName === undefined || secretNamespace === undefined)
      throw new TlsConfigError("TLS_SECRET_NAME and TLS_SECRET_NAMESPACE must be set together");
    const kube = options.kube?.() ?? new KubeJsonClient(loadKubeConfig(env));
    return {
      source: { secret: { name: secretName, namespace: secretNamespace }, kube },
      ...extra,
      close: async () => {
        await kube.close?.();
      },
    };
  }
  return undefined;
}
