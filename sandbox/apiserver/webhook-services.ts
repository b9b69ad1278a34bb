// Where a webhook's `clientConfig.service` lives. kube-apiserver resolves a
// Service to its cluster IP (or an endpoint); the sandbox has no Services, so
// tests and `npm start` tell it through a sandbox-only hook:
//
//   PUT    /_sandbox/services  {"<namespace>/<name>": "https://127.0.0.1:8443", "<namespace>/<name>:<port>": "..."}
//   GET    /_sandbox/services  the current map
//   DELETE /_sandbox/services  forget all
//
// PUT replaces the whole map. A key with a port applies to that
// `service.port` only (default 443), a key without one to every port. Only
// the address (scheme, host, port) of the target is used: the path comes from
// `service.path`, and the certificate is still verified for
// `<name>.<namespace>.svc`, exactly as kube-apiserver does, so a certificate
// without that SAN fails here as it would in a cluster.

import { badRequest } from "./status.ts";

const KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9]*[a-z0-9])?)(:(\d{1,5}))?$/;

export class ServiceMap {
  private targets = new Map<string, URL>();

  /** Replaces the map; 400 on a malformed key or URL, leaving the old map in place. */
  set(body: unknown): void {
    if (typeof body !== "object" || body === null || Array.isArray(body))
      throw badRequest('services: expected {"<namespace>/<name>[:<port>]": "https://host:port"}');
    const next = new Map<string, URL>();
    for (const [key, value] of Object.entries(body)) {
      if (!KEY.test(key))
        throw badRequest(`services: key ${JSON.stringify(key)} is not <namespace>/<name>[:<port>]`);
      let url: URL;
      try {
        url = new URL(String(value));
      } catch {
        throw badRequest(`services: ${key}: ${JSON.stringify(value)} is not a URL`);
      }
      if (url.protocol !== "https:")
        throw badRequest(`services: ${key}: webhooks are called over https only`);
      next.set(key, url);
    }
    this.targets = next;
  }

  clear(): void {
    this.targets.clear();
  }

  toJSON(): Record<string, string> {
    return Object.fromEntries([...this.targets].map(([key, url]) => [key, url.origin]));
  }

  /** The address to dial for a service port, if the map knows it. */
  resolve(namespace: string, name: string, port: number): URL | undefined {
    return this.targets.get(`${namespace}/${name}:${port}`) ?? this.targets.get(`${namespace}/${name}`);
  }
}
