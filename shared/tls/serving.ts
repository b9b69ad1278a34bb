// Where a server's certificate and key come from, and noticing when they
// change. Certificates get rotated under a running process (npm run certs,
// cert-manager, a kubelet updating a mounted Secret), and a restart for that
// would drop in-flight events, so the server swaps its secure context instead.
//
// Files are watched through their directory, not the files themselves: a
// mounted Secret is updated by swapping a `..data` symlink, and editors and
// `npm run certs` replace files by rename; either leaves a watch on the old
// inode blind. A slow poll backs the watch up (network filesystems, missed
// events), and is the only mechanism for a Secret read through the API.

import { type FSWatcher, watch as watchFs } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { createSecureContext, type SecureContextOptions } from "node:tls";
import { isRecord } from "../is-record.ts";
import type { ResourceDescriptor } from "../kube/resources.ts";
import { secrets } from "../kube/resources.ts";
import type { KubeObject } from "../kube/types.ts";
import { certificateExpiry } from "./x509.ts";

/** What loading a Secret needs of a client; KubeJsonClient fits. */
export interface SecretReader {
  get<T extends KubeObject>(r: ResourceDescriptor, name: string, namespace?: string): Promise<T>;
}

export interface TlsFileSource {
  certFile: string;
  keyFile: string;
}

export interface TlsSecretSource {
  /** A `kubernetes.io/tls` Secret: `tls.crt` and `tls.key`. */
  secret: { name: string; namespace: string };
  kube: SecretReader;
}

export type TlsSource = TlsFileSource | TlsSecretSource;

/** PEM certificate (chain) and key of a server. */
export interface ServingTls {
  cert: string;
  key: string;
}

export class TlsConfigError extends Error {
  override name = "TlsConfigError";
}

export function isSecretSource(source: TlsSource): source is TlsSecretSource {
  return "secret" in source;
}

export function describeTlsSource(source: TlsSource): string {
  return isSecretSource(source)
    ? `secret ${source.secret.namespace}/${source.secret.name}`
    : `files ${source.certFile}, ${source.keyFile}`;
}

/** Server-side TLS settings: TLS 1.2 at least (what kube-apiserver offers anyway). */
export function secureContextOptions(tls: ServingTls): SecureContextOptions {
  return { cert: tls.cert, key: tls.key, minVersion: "TLSv1.2" };
}

/** Throws a TlsConfigError when the pair is unusable (not PEM, key not the certificate's). */
export function checkServingTls(tls: ServingTls, what: string): void {
  try {
    createSecureContext(secureContextOptions(tls));
  } catch (err) {
    // OpenSSL says "key values mismatch" for a key that is not the certificate's.
    throw new TlsConfigError(`${what}: unusable certificate/key pair: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

async function loadSecret(source: TlsSecretSource): Promise<ServingTls> {
  const { name, namespace } = source.secret;
  const secret = await source.kube.get<KubeObject>(secrets, name, namespace);
  const data = isRecord(secret.data) ? secret.data : {};
  const decode = (key: string): string => {
    const value = data[key];
    if (typeof value !== "string" || value === "")
      throw new TlsConfigError(`secret ${namespace}/${name} has no ${key}`);
    return Buffer.from(value, "base64").toString("utf8");
  };
  return { cert: decode("tls.crt"), key: decode("tls.key") };
}

/**
 * Reads the certificate and key once and checks that they belong together.
 * Kubernetes API errors (a missing Secret, RBAC) pass through unchanged.
 */
export async function loadServingTls(source: TlsSource): Promise<ServingTls> {
  let tls: ServingTls;
  if (isSecretSource(source)) {
    tls = await loadSecret(source);
  } else {
    try {
      const [cert, key] = await Promise.all([
        readFile(source.certFile, "utf8"),
        readFile(source.keyFile, "utf8"),
      ]);
      tls = { cert, key };
    } catch (err) {
      throw new TlsConfigError(`cannot read ${describeTlsSource(source)}: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }
  checkServingTls(tls, describeTlsSource(source));
  return tls;
}

export interface WatchLogger {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
}

export interface WatchOptions {
  /** Poll period. Default 10 s for files (a backstop for the watch), 60 s for a Secret. */
  intervalMs?: number;
  /** Events arrive in bursts (two files, rename + change); wait this long for quiet. Default 100 ms. */
  debounceMs?: number;
  logger?: WatchLogger;
}

export interface TlsWatcher {
  /** The pair in use now. */
  current(): ServingTls;
  /** Re-reads now; resolves to true when a new pair was taken. */
  reload(): Promise<boolean>;
  close(): void;
}

export const DEFAULT_FILE_POLL_MS = 10_000;
export const DEFAULT_SECRET_POLL_MS = 60_000;

/**
 * Calls `onChange` with every new, valid pair. A pair that fails to load or
 * does not match (the certificate replaced but not the key yet) is logged and
 * skipped: the server keeps the last good pair and tries again on the next
 * event or tick.
 */
export function watchServingTls(
  source: TlsSource,
  initial: ServingTls,
  onChange: (tls: ServingTls) => void,
  options: WatchOptions = {},
): TlsWatcher {
  let current = initial;
  let closed = false;
  let running: Promise<boolean> | undefined;
  let again = false;
  let lastError: string | undefined;
  const what = describeTlsSource(source);

  const reloadOnce = async (): Promise<boolean> => {
    let next: ServingTls;
    try {
      next = await loadServingTls(source);
    } catch (err) {
      const message = (err as Error).message;
      // A broken pair stays broken between ticks; say so once, not every poll.
      if (message !== lastError)
        options.logger?.warn(
          { source: what, error: message },
          "TLS reload failed, keeping the current certificate",
        );
      lastError = message;
      return false;
    }
    lastError = undefined;
    if (closed || (next.cert === current.cert && next.key === current.key)) return false;
    current = next;
    onChange(next);
    let expires: string | undefined;
    try {
      expires = certificateExpiry(next.cert).toISOString();
    } catch {
      // checkServingTls accepted it; an unparsable expiry only costs the log field.
    }
    options.logger?.info({ source: what, expires }, "TLS certificate reloaded");
    return true;
  };

  // One reload at a time; a request during one runs once more afterwards,
  // so the last change is never missed.
  const reload = (): Promise<boolean> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      let changed = false;
      do {
        again = false;
        changed = (await reloadOnce()) || changed;
      } while (again && !closed);
      return changed;
    })().finally(() => {
      running = undefined;
    });
    return running;
  };

  let debounce: NodeJS.Timeout | undefined;
  const schedule = (): void => {
    if (closed) return;
    clearTimeout(debounce);
    debounce = setTimeout(() => void reload(), options.debounceMs ?? 100);
    debounce.unref();
  };

  const watchers: FSWatcher[] = [];
  if (!isSecretSource(source)) {
    for (const dir of new Set([dirname(resolve(source.certFile)), dirname(resolve(source.keyFile))])) {
      try {
        const watcher = watchFs(dir, { persistent: false }, schedule);
        watcher.on("error", (err) =>
          options.logger?.warn({ dir, error: err.message }, "TLS file watch failed; polling only"),
        );
        watchers.push(watcher);
      } catch (err) {
        options.logger?.warn(
          { dir, error: (err as Error).message },
          "cannot watch TLS directory; polling only",
        );
      }
    }
  }
  const interval =
    options.intervalMs ?? (isSecretSource(source) ? DEFAULT_SECRET_POLL_MS : DEFAULT_FILE_POLL_MS);
  const poll = setInterval(() => void reload(), interval);
  poll.unref();

  return {
    current: () => current,
    reload,
    close: () => {
      closed = true;
      clearInterval(poll);
      clearTimeout(debounce);
      for (const watcher of watchers) watcher.close();
    },
  };
}
