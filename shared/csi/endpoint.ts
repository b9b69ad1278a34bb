// Parses CSI_ENDPOINT, the address of the CSI driver, into a grpc-js target.
//
// Accepted, as the CSI sidecars' --csi-address is used in practice:
//   unix:///abs/path   unix:/abs/path   /abs/path   -> unix domain socket
//   host:port   [ipv6]:port   dns:///host:port      -> TCP
// Anything else (relative socket paths, tcp://, http://, a DNS authority,
// a missing port) is refused with a message naming the accepted forms, so a
// typo fails at start-up instead of as an endless UNAVAILABLE.

export type CsiEndpoint =
  | {
      transport: "unix";
      /** Absolute socket path. */
      path: string;
      /** What to hand grpc-js. */
      target: string;
      /** Canonical spelling for logs and messages. */
      address: string;
    }
  | {
      transport: "tcp";
      host: string;
      port: number;
      target: string;
      address: string;
    };

/** Bad CSI_ENDPOINT: a configuration error (no HTTP `status`: it is not the sender's fault). */
export class CsiEndpointError extends Error {
  override name = "CsiEndpointError";
  readonly endpoint: string;
  constructor(endpoint: string, problem: string) {
    super(
      `invalid CSI endpoint ${JSON.stringify(endpoint)}: ${problem} ` +
        "(expected unix:///abs/path, unix:/abs/path, /abs/path, host:port or dns:///host:port)",
    );
    this.endpoint = endpoint;
  }
}

// sun_path is 108 bytes on Linux, including the terminating NUL. A longer
// path fails only at connect time with an obscure error, so refuse it here.
export const MAX_UNIX_SOCKET_PATH_BYTES = 107;

const HOSTNAME =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const IPV6 = /^[0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.-]+)?$/;

function unixEndpoint(raw: string, path: string): CsiEndpoint {
  if (!path.startsWith("/")) throw new CsiEndpointError(raw, "the socket path must be absolute");
  if (path.includes("\0")) throw new CsiEndpointError(raw, "the socket path contains a NUL byte");
  if (path.endsWith("/")) throw new CsiEndpointError(raw, "the socket path names a directory");
  const bytes = Buffer.byteLength(path);
  if (bytes > MAX_UNIX_SOCKET_PATH_BYTES) {
    throw new CsiEndpointError(
      raw,
      `the socket path is ${bytes} bytes long, unix sockets allow at most ${MAX_UNIX_SOCKET_PATH_BYTES}`,
    );
  }
  return { transport: "unix", path, target: `unix://${path}`, address: `unix://${path}` };
}

function parsePort(raw: string, text: string): number {
  if (!/^\d{1,5}$/.test(text))
    throw new CsiEndpointError(raw, `port ${JSON.stringify(text)} is not a number`);
  const port = Number(text);
  if (port < 1 || port > 65535) throw new CsiEndpointError(raw, `port ${port} is out of range 1-65535`);
  return port;
}

function tcpEndpoint(raw: string, hostPort: string): CsiEndpoint {
  let host: string;
  let portText: string;
  let display: string;
  if (hostPort.startsWith("[")) {
    const close = hostPort.indexOf("]");
    if (close < 0) throw new CsiEndpointError(raw, "unterminated [IPv6] host");
    host = hostPort.slice(1, close);
    if (!IPV6.test(host) || !host.includes(":"))
      throw new CsiEndpointError(raw, "not an IPv6 address in [ ]");
    if (hostPort[close + 1] !== ":") throw new CsiEndpointError(raw, "missing :port after [IPv6]");
    portText = hostPort.slice(close + 2);
    display = `[${host}]`;
  } else {
    const colon = hostPort.lastIndexOf(":");
    if (colon < 0) throw new CsiEndpointError(raw, "missing :port");
    host = hostPort.slice(0, colon);
    portText = hostPort.slice(colon + 1);
    if (host.includes(":")) throw new CsiEndpointError(raw, "IPv6 addresses must be written as [addr]:port");
    if (!HOSTNAME.test(host))
      throw new CsiEndpointError(raw, `host ${JSON.stringify(host)} is not a valid name`);
    display = host;
  }
  const port = parsePort(raw, portText);
  const address = `${display}:${port}`;
  return { transport: "tcp", host, port, target: `dns:///${address}`, address };
}

export function parseCsiEndpoint(value: string): CsiEndpoint {
  // Environment values often arrive with a trailing newline.
  const raw = value.trim();
  if (raw === "") throw new CsiEndpointError(value, "it is empty");
  if (raw.startsWith("unix://")) {
    const rest = raw.slice("unix://".length);
    if (!rest.startsWith("/")) {
      throw new CsiEndpointError(
        raw,
        "unix:// must be followed by an absolute path, as in unix:///run/csi.sock",
      );
    }
    return unixEndpoint(raw, rest);
  }
  if (raw.startsWith("unix:")) return unixEndpoint(raw, raw.slice("unix:".length));
  if (raw.startsWith("/")) return unixEndpoint(raw, raw);
  if (raw.startsWith("dns:")) {
    if (!raw.startsWith("dns:///")) {
      throw new CsiEndpointError(raw, "only dns:///host:port is supported (no DNS server authority)");
    }
    return tcpEndpoint(raw, raw.slice("dns:///".length));
  }
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(raw);
  if (scheme) throw new CsiEndpointError(raw, `unsupported scheme ${scheme[1]}://`);
  if (raw.includes("/")) throw new CsiEndpointError(raw, "a relative socket path is not allowed");
  // "unix-abstract:name", "localhost:http": a scheme we do not speak, or a port that is not a number.
  const other = /^([A-Za-z][A-Za-z0-9+.-]*):(?!\d*$)/.exec(raw);
  if (other) throw new CsiEndpointError(raw, `unsupported scheme ${other[1]}: or a non-numeric port`);
  return tcpEndpoint(raw, raw);
}

/** CSI_ENDPOINT from the environment, parsed. */
export function csiEndpointFromEnv(env: NodeJS.ProcessEnv = process.env): CsiEndpoint {
  const value = env.CSI_ENDPOINT;
  if (value === undefined) throw new CsiEndpointError("", "CSI_ENDPOINT is not set");
  return parseCsiEndpoint(value);
}
