import assert from "node:assert/strict";
import { test } from "node:test";
import {
  CsiEndpointError,
  csiEndpointFromEnv,
  MAX_UNIX_SOCKET_PATH_BYTES,
  parseCsiEndpoint,
} from "../../shared/csi/endpoint.ts";

const accepted: [string, ReturnType<typeof parseCsiEndpoint>][] = [
  [
    "unix:///var/lib/csi/sockets/pluginproxy/csi.sock",
    {
      transport: "unix",
      path: "/var/lib/csi/sockets/pluginproxy/csi.sock",
      target: "unix:///var/lib/csi/sockets/pluginproxy/csi.sock",
      address: "unix:///var/lib/csi/sockets/pluginproxy/csi.sock",
    },
  ],
  [
    "unix:/run/csi.sock",
    {
      transport: "unix",
      path: "/run/csi.sock",
      target: "unix:///run/csi.sock",
      address: "unix:///run/csi.sock",
    },
  ],
  [
    "/run/csi.sock",
    {
      transport: "unix",
      path: "/run/csi.sock",
      target: "unix:///run/csi.sock",
      address: "unix:///run/csi.sock",
    },
  ],
  [
    "  /run/csi.sock\n",
    {
      transport: "unix",
      path: "/run/csi.sock",
      target: "unix:///run/csi.sock",
      address: "unix:///run/csi.sock",
    },
  ],
  [
    "localhost:10000",
    {
      transport: "tcp",
      host: "localhost",
      port: 10000,
      target: "dns:///localhost:10000",
      address: "localhost:10000",
    },
  ],
  [
    "127.0.0.1:1",
    { transport: "tcp", host: "127.0.0.1", port: 1, target: "dns:///127.0.0.1:1", address: "127.0.0.1:1" },
  ],
  [
    "csi-driver.kube-system.svc.cluster.local:65535",
    {
      transport: "tcp",
      host: "csi-driver.kube-system.svc.cluster.local",
      port: 65535,
      target: "dns:///csi-driver.kube-system.svc.cluster.local:65535",
      address: "csi-driver.kube-system.svc.cluster.local:65535",
    },
  ],
  [
    "[::1]:9000",
    { transport: "tcp", host: "::1", port: 9000, target: "dns:///[::1]:9000", address: "[::1]:9000" },
  ],
  [
    "dns:///driver.example.com:443",
    {
      transport: "tcp",
      host: "driver.example.com",
      port: 443,
      target: "dns:///driver.example.com:443",
      address: "driver.example.com:443",
    },
  ],
  [
    "dns:///[fd00::12]:50051",
    {
      transport: "tcp",
      host: "fd00::12",
      port: 50051,
      target: "dns:///[fd00::12]:50051",
      address: "[fd00::12]:50051",
    },
  ],
];

for (const [input, expected] of accepted) {
  test(`accepts ${JSON.stringify(input)}`, () => {
    assert.deepEqual(parseCsiEndpoint(input), expected);
  });
}

const refused: [string, RegExp][] = [
  ["", /it is empty/],
  ["   ", /it is empty/],
  ["unix://relative/csi.sock", /unix:\/\/ must be followed by an absolute path/],
  ["unix:relative.sock", /must be absolute/],
  ["unix:", /must be absolute/],
  ["csi.sock", /missing :port/],
  ["./csi.sock", /relative socket path/],
  ["run/csi.sock", /relative socket path/],
  ["/run/csi/", /names a directory/],
  ["tcp://localhost:10000", /unsupported scheme tcp:\/\//],
  ["http://localhost:10000", /unsupported scheme http:\/\//],
  ["unix-abstract:csi", /unsupported scheme unix-abstract:/],
  ["dns://8.8.8.8/driver:443", /only dns:\/\/\/host:port/],
  ["dns:driver:443", /only dns:\/\/\/host:port/],
  ["localhost", /missing :port/],
  ["localhost:", /port "" is not a number/],
  ["localhost:0", /port 0 is out of range/],
  ["localhost:65536", /port 65536 is out of range/],
  ["localhost:123456", /is not a number/],
  ["localhost:http", /non-numeric port/],
  ["::1:9000", /IPv6 addresses must be written as \[addr\]:port/],
  ["[::1]", /missing :port after \[IPv6\]/],
  ["[::1:9000", /unterminated/],
  ["[example.com]:80", /not an IPv6 address/],
  ["bad_host:80", /is not a valid name/],
  ["-bad:80", /is not a valid name/],
  [`/${"s".repeat(MAX_UNIX_SOCKET_PATH_BYTES)}`, /at most 107/],
];

for (const [input, message] of refused) {
  test(`refuses ${JSON.stringify(input.length > 40 ? `${input.slice(0, 40)}...` : input)}`, () => {
    assert.throws(
      () => parseCsiEndpoint(input),
      (err: unknown) => {
        assert.ok(err instanceof CsiEndpointError);
        assert.match(err.message, message);
        assert.match(
          err.message,
          /expected unix:\/\/\/abs\/path, unix:\/abs\/path, \/abs\/path, host:port or dns:\/\/\/host:port/,
        );
        assert.equal("status" in err, false, "a configuration error, not an HTTP 4xx");
        return true;
      },
    );
  });
}

test("the longest allowed socket path is accepted", () => {
  const path = `/${"s".repeat(MAX_UNIX_SOCKET_PATH_BYTES - 1)}`;
  assert.equal(parseCsiEndpoint(path).transport, "unix");
});

test("csiEndpointFromEnv reads CSI_ENDPOINT", () => {
  assert.equal(csiEndpointFromEnv({ CSI_ENDPOINT: "unix:///csi/csi.sock" }).target, "unix:///csi/csi.sock");
  assert.throws(() => csiEndpointFromEnv({}), /CSI_ENDPOINT is not set/);
});
