// How KubeJsonClient's requests reach the API server: one JSON request in,
// status, headers and body text out. Two strategies, picked once per server
// and TLS material by openTransport:
// - HTTP/2 on Node's own http2 module, when the server is HTTPS without a
//   proxy and offers h2 in ALPN (kube-apiserver always does): one session
//   multiplexes every request. A request costs the client about a quarter
//   less CPU than over undici's HTTP/2 client (bench/README.md, "Figures:
//   HTTP/2 on node:http2, warmed processes").
// - undici, client-node's own HTTP stack, for everything else: plain HTTP
//   (the sandbox), HTTP(S) and SOCKS proxies, servers without h2.

import { once } from "node:events";
import http2 from "node:http2";
import { isIP } from "node:net";
import tls from "node:tls";
import type { Dispatcher } from "undici";

export interface TransportRequest {
  /** scheme://host:port */
  origin: string;
  /** Path and query. */
  path: string;
  method: string;
  headers: Record<string, string>;
  body: string | null;
  signal: AbortSignal;
}

export interface TransportResponse {
  statusCode: number;
  /** Built on demand: only answers that become errors need them. */
  headers(): Record<string, string | string[] | undefined>;
  text: string;
}

export interface KubeTransport {
  readonly protocol: "h2" | "undici";
  request(request: TransportRequest): Promise<TransportResponse>;
  /** After in-flight requests. */
  close(): Promise<void>;
}

/** The TLS part of a kubeconfig, as client-node's applyToHTTPSOptions computes it. */
export interface TlsOptions {
  ca?: unknown;
  cert?: unknown;
  key?: unknown;
  pfx?: unknown;
  passphrase?: unknown;
  rejectUnauthorized?: unknown;
  servername?: unknown;
}

export interface TransportTarget {
  server: string;
  proxyUrl: string | undefined;
  tls: TlsOptions;
}

/** Requests through an undici dispatcher (client-node's, or a plain Agent). */
export class UndiciTransport implements KubeTransport {
  readonly protocol = "undici";
  private readonly dispatcher: Dispatcher;

  constructor(dispatcher: Dispatcher) {
    this.dispatcher = dispatcher;
  }

  async request(r: TransportRequest): Promise<TransportResponse> {
    const res = await this.dispatcher.request({
      origin: r.origin,
      path: r.path,
      method: r.method as Dispatcher.HttpMethod,
      headers: r.headers,
      body: r.body,
      signal: r.signal,
    });
    // Always drain the body: that is what hands the connection back to the pool.
    const text = await res.body.text();
    return { statusCode: res.statusCode, headers: () => res.headers, text };
  }

  close(): Promise<void> {
    return this.dispatcher.close();
  }
}

/**
 * HTTP/2 for an HTTPS server without a proxy when the server offers h2,
 * else undici from `fallback`. The probe is the first session's own TLS
 * handshake, so choosing costs no extra connection.
 */
export async function openTransport(
  target: TransportTarget,
  fallback: () => Promise<Dispatcher>,
  options: Http2Options = {},
): Promise<KubeTransport> {
  const url = new URL(target.server);
  if (url.protocol !== "https:" || target.proxyUrl) return new UndiciTransport(await fallback());
  const socket = await connectTls(url, target.tls, ["h2", "http/1.1"]);
  if (socket.alpnProtocol !== "h2") {
    socket.destroy();
    return new UndiciTransport(await fallback());
  }
  return new Http2Transport(url, target.tls, socket, options);
}

export interface Http2Options {
  /** After a request timed out: a session that does not answer a PING within this is dropped. Default 5 s. */
  pingTimeoutMs?: number;
  /** A session idle this long is closed before the next request, which opens a new one. Default 60 s. */
  idleMs?: number;
}

/** undici's default connect timeout. */
const CONNECT_TIMEOUT_MS = 10_000;

async function connectTls(url: URL, options: TlsOptions, alpn: string[]): Promise<tls.TLSSocket> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const servername =
    typeof options.servername === "string" && options.servername !== ""
      ? options.servername
      : isIP(host) === 0
        ? host
        : undefined;
  const socket = tls.connect({
    host,
    port: Number(url.port || 443),
    ALPNProtocols: alpn,
    ...(servername !== undefined ? { servername } : {}),
    ...(options.ca !== undefined ? { ca: options.ca as tls.ConnectionOptions["ca"] } : {}),
    ...(options.cert !== undefined ? { cert: options.cert as tls.ConnectionOptions["cert"] } : {}),
    ...(options.key !== undefined ? { key: options.key as tls.ConnectionOptions["key"] } : {}),
    ...(options.pfx !== undefined ? { pfx: options.pfx as tls.ConnectionOptions["pfx"] } : {}),
    ...(typeof options.passphrase === "string" ? { passphrase: options.passphrase } : {}),
    ...(options.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}),
  });
  try {
    await once(socket, "secureConnect", { signal: AbortSignal.timeout(CONNECT_TIMEOUT_MS) });
  } catch (err) {
    socket.destroy();
    if ((err as Error | undefined)?.name !== "AbortError") throw err;
    throw Object.assign(new Error(`no TLS connection to ${url.host} within ${CONNECT_TIMEOUT_MS} ms`), {
      code: "ETIMEDOUT",
    });
  }
  // Like client-node's dispatchers: dead peers are noticed within a minute.
  socket.setKeepAlive(true, 30_000);
  return socket;
}

// Larger than Node's 64 KiB defaults, so a big LIST is not paced by window
// updates; the session memory bounds what many such streams buffer at once.
const STREAM_WINDOW_BYTES = 4 << 20;
const SESSION_WINDOW_BYTES = 16 << 20;
const MAX_SESSION_MEMORY_MB = 128;
const PING_TIMEOUT_MS = 5_000;
// Longer than a busy controller's gaps, shorter than the idle timeouts of the
// NATs and load balancers in between; a process frozen in between (Lambda)
// thus never sends into a connection that died while it slept.
const SESSION_IDLE_MS = 60_000;

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM } = http2.constants;

/** Headers HTTP/2 forbids (RFC 9113 8.2.2); client-node's auth never sets them, but they must not reach nghttp2. */
const CONNECTION_HEADERS = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "host",
]);

/** A request that never reached the server's handler: safe to send again on a new session. */
class NotSentError extends Error {
  override name = "NotSentError";
  /** Transient, like a refused connection, if the second try fails the same way. */
  readonly code = "ECONNRESET";
}

/**
 * One HTTP/2 session at a time, opened on first use and again after the
 * server ends it (GOAWAY, connection lost) or after it sat idle for a while.
 * Streams the server refused (REFUSED_STREAM, or a session already going
 * away) are sent once more; they were not processed.
 */
export class Http2Transport implements KubeTransport {
  readonly protocol = "h2";
  private readonly url: URL;
  private readonly tls: TlsOptions;
  private current: Promise<http2.ClientHttp2Session> | undefined;
  /** The session `current` resolved to, once it has. */
  private live: http2.ClientHttp2Session | undefined;
  /** Streams open per session: a session holds the process open only while it has some. */
  private readonly active = new WeakMap<http2.ClientHttp2Session, number>();
  /** performance.now() when a session last had no stream open. */
  private readonly idleSince = new WeakMap<http2.ClientHttp2Session, number>();
  private closed = false;
  private readonly pingTimeoutMs: number;
  private readonly idleMs: number;

  constructor(url: URL, tlsOptions: TlsOptions, socket?: tls.TLSSocket, options: Http2Options = {}) {
    this.url = url;
    this.tls = tlsOptions;
    this.pingTimeoutMs = options.pingTimeoutMs ?? PING_TIMEOUT_MS;
    this.idleMs = options.idleMs ?? SESSION_IDLE_MS;
    if (socket) this.current = Promise.resolve(this.sessionOn(socket));
  }

  async request(r: TransportRequest): Promise<TransportResponse> {
    let sent = 0;
    for (;;) {
      if (this.closed) throw new Error("the HTTP/2 transport is closed");
      const session = await this.session();
      if (this.idleTooLong(session)) {
        this.forget(session);
        session.close();
        continue;
      }
      sent++;
      try {
        return await this.exchange(session, r);
      } catch (err) {
        if (!(err instanceof NotSentError) || sent > 1) throw err;
        // A refused stream leaves a working session (it may have come before
        // the server's stream limit did); one that is closing is left behind.
        if (session.closed || session.destroyed) this.forget(session);
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const current = this.current;
    this.current = undefined;
    this.live = undefined;
    const session = await current?.catch(() => undefined);
    if (session && !session.closed) {
      const closed = once(session, "close").catch(() => undefined);
      // An idle session is unref'd; the process must stay up until it has closed.
      session.ref();
      session.close();
      await closed;
    }
  }

  private session(): Promise<http2.ClientHttp2Session> {
    let current = this.current;
    if (current === undefined) {
      current = connectTls(this.url, this.tls, ["h2"]).then((socket) => {
        if (socket.alpnProtocol !== "h2") {
          socket.destroy();
          throw Object.assign(new Error(`${this.url.origin} no longer offers HTTP/2`), {
            code: "ECONNRESET",
          });
        }
        return this.sessionOn(socket);
      });
      this.current = current;
      // A failed connect is not kept: the next request tries again.
      current.catch(() => {
        if (this.current === current) this.current = undefined;
      });
    }
    return current;
  }

  private sessionOn(socket: tls.TLSSocket): http2.ClientHttp2Session {
    const session = http2.connect(this.url.origin, {
      createConnection: () => socket,
      maxSessionMemory: MAX_SESSION_MEMORY_MB,
      settings: { initialWindowSize: STREAM_WINDOW_BYTES, enablePush: false },
    });
    this.live = session;
    this.idleSince.set(session, performance.now());
    session.setLocalWindowSize(SESSION_WINDOW_BYTES);
    const drop = (): void => this.forget(session);
    session.on("goaway", drop);
    session.on("close", drop);
    // An error also closes the session; the streams on it see their own errors.
    session.on("error", drop);
    session.unref();
    return session;
  }

  /** The next request opens a new session, if this one is still the current. */
  private forget(session: http2.ClientHttp2Session): void {
    if (this.live !== session) return;
    this.live = undefined;
    this.current = undefined;
  }

  private idleTooLong(session: http2.ClientHttp2Session): boolean {
    if ((this.active.get(session) ?? 0) > 0) return false;
    return performance.now() - (this.idleSince.get(session) ?? performance.now()) > this.idleMs;
  }

  private exchange(session: http2.ClientHttp2Session, r: TransportRequest): Promise<TransportResponse> {
    return new Promise<TransportResponse>((resolve, reject) => {
      if (r.signal.aborted) return reject(r.signal.reason);
      const headers: http2.OutgoingHttpHeaders = { ":method": r.method, ":path": r.path };
      for (const [name, value] of Object.entries(r.headers)) {
        const lower = name.toLowerCase();
        if (!CONNECTION_HEADERS.has(lower)) headers[lower] = value;
      }
      let stream: http2.ClientHttp2Stream;
      try {
        stream = session.request(headers, { endStream: r.body === null });
      } catch (err) {
        // A session already closing or out of stream ids: nothing was sent.
        return reject(new NotSentError("the HTTP/2 session could not take the request", { cause: err }));
      }
      this.started(session);
      let statusCode = 0;
      let received: http2.IncomingHttpHeaders = {};
      const responseHeaders = (): Record<string, string | string[] | undefined> => {
        const out: Record<string, string | string[] | undefined> = {};
        for (const [name, value] of Object.entries(received)) if (!name.startsWith(":")) out[name] = value;
        return out;
      };
      const chunks: Buffer[] = [];
      let settled = false;
      const settle = (fn: () => void): void => {
        if (settled) return;
        settled = true;
        r.signal.removeEventListener("abort", onAbort);
        this.finished(session);
        fn();
      };
      const onAbort = (): void => {
        settle(() => reject(r.signal.reason));
        stream.close(NGHTTP2_CANCEL);
        if ((r.signal.reason as Error | undefined)?.name === "TimeoutError") this.probe(session);
      };
      r.signal.addEventListener("abort", onAbort, { once: true });
      stream.on("response", (h) => {
        statusCode = Number(h[":status"]);
        received = h;
      });
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", () =>
        settle(() =>
          resolve({ statusCode, headers: responseHeaders, text: Buffer.concat(chunks).toString("utf8") }),
        ),
      );
      stream.on("error", (err) => settle(() => reject(streamFailure(stream, err))));
      stream.on("close", () =>
        settle(() => reject(streamFailure(stream, new Error(`stream closed (code ${stream.rstCode})`)))),
      );
      if (r.body !== null) stream.end(r.body);
    });
  }

  private started(session: http2.ClientHttp2Session): void {
    const open = this.active.get(session) ?? 0;
    this.active.set(session, open + 1);
    if (open === 0) session.ref();
  }

  private finished(session: http2.ClientHttp2Session): void {
    const open = (this.active.get(session) ?? 1) - 1;
    this.active.set(session, open);
    if (open > 0) return;
    this.idleSince.set(session, performance.now());
    if (!session.destroyed) session.unref();
  }

  /** A request timed out: if the session is dead too, drop it rather than send more into it. */
  private probe(session: http2.ClientHttp2Session): void {
    if (session.destroyed) return;
    const timer = setTimeout(() => session.destroy(), this.pingTimeoutMs).unref();
    const sent = session.ping((err) => {
      clearTimeout(timer);
      if (err) session.destroy();
    });
    if (!sent) clearTimeout(timer);
  }
}

/** A refused stream was never processed (RFC 9113 8.7); anything else keeps its error, made transient. */
function streamFailure(stream: http2.ClientHttp2Stream, err: Error): Error {
  if (stream.rstCode === NGHTTP2_REFUSED_STREAM)
    return new NotSentError("the server refused the stream", { cause: err });
  const code = (err as { code?: unknown }).code;
  // The connection or stream failed mid-request, as ECONNRESET does on HTTP/1.1.
  return Object.assign(new Error(`HTTP/2 stream failed: ${err.message}`, { cause: err }), {
    code: typeof code === "string" && code !== "" && !code.startsWith("ERR_HTTP2") ? code : "ECONNRESET",
  });
}
