// KubeJsonClient over HTTP/2 (shared/kube/transport.ts) against a real
// node:http2 TLS server: what reaches the server, one session for many
// requests, the servers it falls back to undici for, and what happens when
// the server ends the session (GOAWAY), refuses or resets a stream, stops
// answering, or the connection goes dead.
import assert from "node:assert/strict";
import { createServer as createHttpServer } from "node:http";
import http2 from "node:http2";
import { createServer as createHttpsServer } from "node:https";
import { type AddressInfo, connect, createServer as createTcpServer, type Socket } from "node:net";
import { after, describe, test } from "node:test";
import type { TLSSocket } from "node:tls";
import { KubeConfig } from "@kubernetes/client-node";
import { isTransient, networkErrorCodeOf, retryAfterSeconds } from "../../shared/kube/api-errors.ts";
import { KubeApiError, KubeJsonClient, KubeRequestError } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../shared/kube/resources.ts";
import { openTransport } from "../../shared/kube/transport.ts";
import type { PersistentVolume } from "../../shared/kube/types.ts";
import { generateCertificates } from "../../shared/tls/certificates.ts";
import { rejection } from "../helpers/rejection.ts";

const serving = generateCertificates({
  service: "apiserver",
  namespace: "default",
  extraDnsNames: ["127.0.0.1"],
});
const client = generateCertificates({ service: "storage-functions", namespace: "default" });

function volume(name: string): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name, resourceVersion: "7" },
    spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"] },
  };
}

type Handler = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, body: string) => void;

interface H2Server {
  port: number;
  sessions: http2.ServerHttp2Session[];
  requests: { method: string; path: string; headers: http2.IncomingHttpHeaders; body: string; cn?: string }[];
  handler: Handler;
}

const answerJson: Handler = (stream, headers, body) => {
  const name = String(headers[":path"]).split("?")[0]?.split("/").at(-1) ?? "";
  stream.respond({
    ":status": headers[":method"] === "POST" ? 201 : 200,
    "content-type": "application/json",
  });
  stream.end(body !== "" ? body : JSON.stringify(volume(name)));
};

async function startH2Server(
  options: { settings?: http2.Settings; allowHTTP1?: boolean } = {},
): Promise<H2Server> {
  const state: H2Server = { port: 0, sessions: [], requests: [], handler: answerJson };
  const server = http2.createSecureServer({
    key: serving.key,
    cert: serving.cert,
    requestCert: true,
    rejectUnauthorized: false,
    allowHTTP1: options.allowHTTP1 ?? false,
    ...(options.settings ? { settings: options.settings } : {}),
  });
  server.on("session", (session) => state.sessions.push(session));
  server.on("stream", (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      const body = Buffer.concat(chunks).toString();
      const peer = (stream.session?.socket as TLSSocket | undefined)?.getPeerCertificate();
      state.requests.push({
        method: String(headers[":method"]),
        path: String(headers[":path"]),
        headers,
        body,
        ...(peer?.subject?.CN ? { cn: String(peer.subject.CN) } : {}),
      });
      state.handler(stream, headers, body);
    });
    stream.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.port = (server.address() as AddressInfo).port;
  after(async () => {
    for (const s of state.sessions) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return state;
}

function kubeConfigFor(port: number, extra: { token?: string } = {}): KubeConfig {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const kc = new KubeConfig();
  kc.loadFromClusterAndUser(
    { name: "c", server: `https://127.0.0.1:${port}`, caData: b64(serving.caCert), skipTLSVerify: false },
    {
      name: "u",
      certData: b64(client.cert),
      keyData: b64(client.key),
      ...(extra.token ? { token: extra.token } : {}),
    },
  );
  return kc;
}

function newClient(
  port: number,
  options: ConstructorParameters<typeof KubeJsonClient>[1] = {},
): KubeJsonClient {
  const c = new KubeJsonClient(kubeConfigFor(port, { token: "s3cret" }), options);
  after(() => c.close());
  return c;
}

describe("KubeJsonClient over HTTP/2", () => {
  test("cluster CA, client certificate and token reach the server; 200 requests share one session", async () => {
    const server = await startH2Server();
    const kube = newClient(server.port);
    const created = await kube.create(persistentVolumes, volume("pv-1"));
    assert.equal(created.metadata.name, "pv-1");
    assert.equal(await kube.protocol(), "h2");
    await Promise.all(Array.from({ length: 100 }, (_, i) => kube.get(persistentVolumes, `pv-${i}`)));
    for (let i = 0; i < 99; i++) await kube.get(persistentVolumes, `pv-${i}`);
    assert.equal(server.sessions.length, 1, "one TLS connection for every request");
    assert.equal(server.requests.length, 200);

    const post = server.requests[0]!;
    assert.equal(post.method, "POST");
    assert.equal(post.path, "/api/v1/persistentvolumes");
    assert.equal(post.cn, "storage-functions.default.svc", "the client certificate was presented");
    assert.equal(post.headers.authorization, "Bearer s3cret");
    assert.equal(post.headers["content-type"], "application/json");
    assert.equal(post.headers.accept, "application/json");
    assert.match(String(post.headers["user-agent"]), /^kube-storage-functions/);
    assert.equal(JSON.parse(post.body).metadata.name, "pv-1");
  });

  test("a non-2xx answer is a KubeApiError with the Status and the headers", async () => {
    const server = await startH2Server();
    server.handler = (stream) => {
      stream.respond({ ":status": 429, "content-type": "application/json", "retry-after": "3" });
      stream.end(
        JSON.stringify({
          kind: "Status",
          status: "Failure",
          reason: "TooManyRequests",
          message: "slow down",
          code: 429,
        }),
      );
    };
    const err = await rejection(newClient(server.port).get(persistentVolumes, "pv-1"));
    assert.ok(err instanceof KubeApiError);
    assert.equal(err.code, 429);
    assert.equal(err.reason, "TooManyRequests");
    assert.equal(retryAfterSeconds(err), 3);
    assert.equal(err.headers[":status"], undefined, "no pseudo-headers among the headers");
    assert.ok(isTransient(err));
  });

  test("many more requests than the server's stream limit wait for a free stream", async () => {
    const server = await startH2Server({ settings: { maxConcurrentStreams: 4 } });
    const held: (() => void)[] = [];
    server.handler = (stream, headers, body) => {
      held.push(() => answerJson(stream, headers, body));
      if (held.length >= 4) for (const release of held.splice(0)) release();
    };
    const kube = newClient(server.port);
    const got = await Promise.all(
      Array.from({ length: 40 }, (_, i) => kube.get(persistentVolumes, `pv-${i}`)),
    );
    assert.equal(got.length, 40);
    assert.equal(server.sessions.length, 1);

    // Once the server's limit is known, the client waits for a free stream
    // instead of sending past it (kube-apiserver would answer PROTOCOL_ERROR,
    // which is not retried): 40 requests take 40 consecutive stream ids, so
    // none was refused and sent again.
    const ids: number[] = [];
    server.handler = (stream, headers, body) => {
      ids.push(stream.id ?? 0);
      setTimeout(() => answerJson(stream, headers, body), 2);
    };
    await Promise.all(Array.from({ length: 40 }, (_, i) => kube.get(persistentVolumes, `pv-${i}`)));
    assert.equal(ids.length, 40);
    assert.equal(Math.max(...ids) - Math.min(...ids), 2 * 39, `stream ids ${ids.join(",")}`);
  });

  test("GOAWAY: requests after it go over a new session, none fails", async () => {
    const server = await startH2Server();
    const kube = newClient(server.port);
    for (let i = 0; i < 5; i++) await kube.get(persistentVolumes, "pv-1");
    server.sessions[0]!.goaway();
    for (let i = 0; i < 5; i++) await kube.get(persistentVolumes, "pv-1");
    assert.equal(server.sessions.length, 2);
    assert.equal(server.requests.length, 10);
  });

  test("a refused stream was not processed: it is sent once more; refused twice, it fails as transient", async () => {
    const server = await startH2Server();
    let refusals = 1;
    server.handler = (stream, headers, body) => {
      if (refusals-- > 0) return stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
      answerJson(stream, headers, body);
    };
    const kube = newClient(server.port);
    const pv = await kube.replace(persistentVolumes, volume("pv-1"));
    assert.equal(pv.metadata.name, "pv-1");
    assert.equal(server.requests.length, 2, "sent twice");

    refusals = 2;
    server.requests.length = 0;
    const err = await rejection(kube.get(persistentVolumes, "pv-1"));
    assert.ok(err instanceof KubeRequestError);
    assert.ok(isTransient(err), `${networkErrorCodeOf(err)} is transient`);
    assert.equal(server.requests.length, 2, "not sent a third time");
  });

  test("a stream reset for another reason fails as transient and is not sent again (the write may have happened)", async () => {
    const server = await startH2Server();
    server.handler = (stream) => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    const kube = newClient(server.port);
    const err = await rejection(kube.replace(persistentVolumes, volume("pv-1")));
    assert.ok(err instanceof KubeRequestError);
    assert.ok(isTransient(err));
    assert.equal(server.requests.length, 1);
    server.handler = answerJson;
    assert.equal(
      (await kube.get(persistentVolumes, "pv-1")).metadata.name,
      "pv-1",
      "the session still works",
    );
  });

  test("no answer in time: a transient ETIMEDOUT, the stream is cancelled, a live session is kept", async () => {
    const server = await startH2Server();
    const cancelled: number[] = [];
    server.handler = (stream) => stream.on("close", () => cancelled.push(stream.rstCode));
    const kube = newClient(server.port, { requestTimeoutMs: 200 });
    const err = await rejection(kube.get(persistentVolumeClaims, "data", "ns"));
    assert.ok(err instanceof KubeRequestError);
    assert.equal(err.code, "ETIMEDOUT");
    assert.ok(isTransient(err));
    server.handler = answerJson;
    await kube.get(persistentVolumes, "pv-1");
    assert.deepEqual(cancelled, [http2.constants.NGHTTP2_CANCEL]);
    assert.equal(server.sessions.length, 1, "the session answered the PING and was kept");
  });

  test("a dead connection (no PING answer after a timeout) is dropped; the next request connects anew", async () => {
    const server = await startH2Server();
    // A TCP relay that can go silent, as a connection behind a dead NAT entry does.
    const relayed: Socket[] = [];
    let silent = false;
    const relay = createTcpServer((downstream) => {
      const upstream = connect(server.port, "127.0.0.1");
      relayed.push(downstream, upstream);
      downstream.on("data", (d) => silent || upstream.write(d));
      upstream.on("data", (d) => silent || downstream.write(d));
      downstream.on("error", () => upstream.destroy());
      upstream.on("error", () => downstream.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
    after(() => {
      for (const s of relayed) s.destroy();
      relay.close();
    });
    const port = (relay.address() as AddressInfo).port;
    const kc = kubeConfigFor(port);
    const opened = await openTransport(
      { server: `https://127.0.0.1:${port}`, proxyUrl: undefined, tls: { ca: Buffer.from(serving.caCert) } },
      () => assert.fail("no fallback for an h2 server"),
      { pingTimeoutMs: 100 },
    );
    after(() => opened.close());
    assert.equal(opened.protocol, "h2");
    assert.ok(kc.getCurrentCluster());
    const get = (timeoutMs: number) =>
      opened.request({
        origin: `https://127.0.0.1:${port}`,
        path: "/api/v1/persistentvolumes/pv-1",
        method: "GET",
        headers: {},
        body: null,
        signal: AbortSignal.timeout(timeoutMs),
      });
    assert.equal((await get(5_000)).statusCode, 200);
    silent = true;
    const err = await rejection(get(100));
    assert.equal((err as Error).name, "TimeoutError");
    await new Promise((resolve) => setTimeout(resolve, 300));
    silent = false;
    assert.equal((await get(5_000)).statusCode, 200);
    assert.equal(server.sessions.length, 2, "a second connection after the dead one was dropped");
  });

  test("a session idle longer than idleMs is closed before the next request, which gets a new one", async () => {
    const server = await startH2Server();
    const origin = `https://127.0.0.1:${server.port}`;
    const transport = await openTransport(
      { server: origin, proxyUrl: undefined, tls: { ca: Buffer.from(serving.caCert) } },
      () => assert.fail("no fallback for an h2 server"),
      { idleMs: 150 },
    );
    after(() => transport.close());
    const get = () =>
      transport.request({
        origin,
        path: "/api/v1/persistentvolumes/pv-1",
        method: "GET",
        headers: {},
        body: null,
        signal: AbortSignal.timeout(5_000),
      });
    await get();
    await new Promise((resolve) => setTimeout(resolve, 50));
    await get();
    assert.equal(server.sessions.length, 1, "a short pause keeps the session");
    await new Promise((resolve) => setTimeout(resolve, 250));
    assert.equal((await get()).statusCode, 200);
    assert.equal(server.sessions.length, 2, "after the idle time, a new session");
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok(server.sessions[0]!.closed || server.sessions[0]!.destroyed, "the idle one was closed");
    assert.equal(server.requests.length, 3);
  });

  test("servers without h2 and plain-HTTP servers are reached through undici", async () => {
    const h1 = createHttpsServer({ key: serving.key, cert: serving.cert }, (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(volume("pv-1")));
    });
    await new Promise<void>((resolve) => h1.listen(0, "127.0.0.1", resolve));
    after(() => h1.close());
    const viaH1 = newClient((h1.address() as AddressInfo).port);
    assert.equal((await viaH1.get(persistentVolumes, "pv-1")).metadata.name, "pv-1");
    assert.equal(await viaH1.protocol(), "undici");

    // Plain HTTP (the sandbox, a local proxy): undici, no TLS attempted.
    const plain = createHttpServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(volume("pv-2")));
    });
    await new Promise<void>((resolve) => plain.listen(0, "127.0.0.1", resolve));
    after(() => plain.close());
    const kc = new KubeConfig();
    kc.loadFromClusterAndUser(
      { name: "c", server: `http://127.0.0.1:${(plain.address() as AddressInfo).port}`, skipTLSVerify: true },
      { name: "u", token: "t" },
    );
    const viaHttp = new KubeJsonClient(kc);
    after(() => viaHttp.close());
    assert.equal((await viaHttp.get(persistentVolumes, "pv-2")).metadata.name, "pv-2");
    assert.equal(await viaHttp.protocol(), "undici");

    // A server that speaks both gets HTTP/2; `transport: "undici"` keeps undici.
    const both = await startH2Server({ allowHTTP1: true });
    const auto = newClient(both.port);
    await auto.get(persistentVolumes, "pv-1");
    assert.equal(await auto.protocol(), "h2");
    const forced = newClient(both.port, { transport: "undici" });
    await forced.get(persistentVolumes, "pv-1");
    assert.equal(await forced.protocol(), "undici");
  });

  test("a server certificate the cluster CA did not sign is refused, and that is not transient", async () => {
    const server = await startH2Server();
    const other = generateCertificates({ service: "other", namespace: "default" });
    const kc = kubeConfigFor(server.port);
    (kc.getCurrentCluster() as { caData?: string }).caData = Buffer.from(other.caCert).toString("base64");
    const distrustful = new KubeJsonClient(kc);
    after(() => distrustful.close());
    const err = await rejection(distrustful.get(persistentVolumes, "pv-1"));
    assert.ok(err instanceof KubeRequestError);
    assert.ok(!isTransient(err), `${networkErrorCodeOf(err)} is configuration, not weather`);
    assert.equal(server.requests.length, 0);
  });

  test("close() waits for requests in flight, then ends the session", async () => {
    const server = await startH2Server();
    let release: (() => void) | undefined;
    server.handler = (stream, headers, body) => {
      release = () => answerJson(stream, headers, body);
    };
    const kube = new KubeJsonClient(kubeConfigFor(server.port));
    const pending = kube.get(persistentVolumes, "pv-1");
    while (release === undefined) await new Promise((resolve) => setTimeout(resolve, 5));
    const closing = kube.close();
    release();
    assert.equal((await pending).metadata.name, "pv-1");
    await closing;
    await assert.rejects(kube.get(persistentVolumes, "pv-1"), /closed/);
  });
});
