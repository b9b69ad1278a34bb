// HTTPS serving with certificates from `npm run certs` (the real script, as a
// process), a client that trusts only the generated CA, and certificate
// reload without a restart.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { createFunctionApp } from "../../shared/http/function-app.ts";
import { type ServedFunction, serveFunction } from "../../shared/http/serve.ts";
import { generateCertificates } from "../../shared/tls/certificates.ts";
import { tlsFromEnv } from "../../shared/tls/env.ts";
import { loadServingTls, TlsConfigError, watchServingTls } from "../../shared/tls/serving.ts";
import { echoSpec } from "../http/echo-function.ts";
import { fingerprintOf, httpsFetch, repoRoot, runCerts, summaryOf, waitFor } from "./helpers.ts";

const fixture = fileURLToPath(new URL("../http/fixtures/slow-function.ts", import.meta.url));

let dir: string;
let ca: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-tls-"));
  const run = await runCerts(["--out", dir, "--service", "echo", "--namespace", "fns"]);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(summaryOf(run).renewed, true);
  ca = await readFile(join(dir, "ca.crt"), "utf8");
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("serveFunction over HTTPS", () => {
  let served: ServedFunction;
  const lines: string[] = [];

  before(async () => {
    served = await serveFunction(createFunctionApp(echoSpec({ auth: null })), {
      host: "127.0.0.1",
      handleSignals: false,
      stdout: { write: (line: string) => lines.push(line) },
      tls: { certFile: join(dir, "tls.crt"), keyFile: join(dir, "tls.key") },
      tlsReloadIntervalMs: 200,
    });
  });

  after(async () => {
    await served.close();
  });

  test("announces an https:// URL and answers a client that trusts only the CA", async () => {
    assert.match(served.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    assert.deepEqual(lines, [`${JSON.stringify({ ready: true, function: "echo", url: served.url })}\n`]);
    const health = await httpsFetch(`${served.url}/healthz`, { ca });
    assert.equal(health.status, 200);
    const event = await httpsFetch(`${served.url}/`, {
      ca,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: "tls" }),
    });
    assert.equal(event.status, 200);
    assert.deepEqual(JSON.parse(event.body), { function: "echo", results: [{ echoed: "tls" }] });
    // The Service names are on the certificate too, as kube-apiserver checks them.
    const bySvc = await httpsFetch(`${served.url}/healthz`, { ca, servername: "echo.fns.svc" });
    assert.equal(bySvc.status, 200);
    assert.equal(bySvc.fingerprint, fingerprintOf(await readFile(join(dir, "tls.crt"), "utf8")));
  });

  test("refuses clients that do not trust the CA, and plain HTTP gets nothing", async () => {
    const stranger = generateCertificates({ service: "echo", namespace: "fns", validDays: 1 });
    await assert.rejects(
      httpsFetch(`${served.url}/healthz`, { ca: stranger.caCert }),
      /self-signed|unable to verify|certificate/i,
    );
    await assert.rejects(fetch(`${served.url.replace("https:", "http:")}/healthz`));
  });

  test("a renewed certificate is served to new connections without a restart", async () => {
    const before = fingerprintOf(await readFile(join(dir, "tls.crt"), "utf8"));
    const run = await runCerts(["--out", dir, "--service", "echo", "--namespace", "fns", "--force"]);
    assert.equal(run.code, 0, run.stderr);
    const renewed = await readFile(join(dir, "tls.crt"), "utf8");
    const newCa = await readFile(join(dir, "ca.crt"), "utf8");
    assert.notEqual(fingerprintOf(renewed), before);
    await waitFor("the new certificate", async () => {
      const answer = await httpsFetch(`${served.url}/healthz`, { ca: [ca, newCa] });
      return answer.fingerprint === fingerprintOf(renewed);
    });
    // A client that trusts only the new CA is now served too.
    assert.equal((await httpsFetch(`${served.url}/healthz`, { ca: newCa })).status, 200);
    ca = newCa;
  });
});

describe("watchServingTls", () => {
  test("skips a half-replaced pair, keeps the last good one, and takes the pair once complete", async () => {
    const work = await mkdtemp(join(tmpdir(), "ksf-tls-watch-"));
    try {
      const first = generateCertificates({ service: "a", namespace: "b" });
      const second = generateCertificates({ service: "a", namespace: "b" });
      const source = { certFile: join(work, "tls.crt"), keyFile: join(work, "tls.key") };
      await writeFile(source.certFile, first.cert);
      await writeFile(source.keyFile, first.key);
      const initial = await loadServingTls(source);
      const seen: string[] = [];
      const warnings: string[] = [];
      const watcher = watchServingTls(source, initial, (tls) => seen.push(fingerprintOf(tls.cert)), {
        intervalMs: 60_000,
        debounceMs: 10,
        logger: { info: () => {}, warn: (_d, message) => warnings.push(message) },
      });
      try {
        await writeFile(source.certFile, second.cert);
        assert.equal(await watcher.reload(), false);
        assert.equal(watcher.current().cert, first.cert);
        assert.deepEqual(warnings, ["TLS reload failed, keeping the current certificate"]);
        await writeFile(source.keyFile, second.key);
        // The directory watch notices by itself.
        await waitFor("the watch to pick up the pair", async () => seen.length === 1);
        assert.deepEqual(seen, [fingerprintOf(second.cert)]);
        assert.equal(await watcher.reload(), false, "an unchanged pair is not taken twice");
      } finally {
        watcher.close();
      }
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });

  test("loadServingTls refuses a key that is not the certificate's, and missing files", async () => {
    const work = await mkdtemp(join(tmpdir(), "ksf-tls-bad-"));
    try {
      const a = generateCertificates({ service: "a", namespace: "b" });
      const b = generateCertificates({ service: "a", namespace: "b" });
      await writeFile(join(work, "tls.crt"), a.cert);
      await writeFile(join(work, "tls.key"), b.key);
      const source = { certFile: join(work, "tls.crt"), keyFile: join(work, "tls.key") };
      await assert.rejects(loadServingTls(source), (err: unknown) => {
        assert.ok(err instanceof TlsConfigError);
        assert.match(err.message, /unusable certificate\/key pair/);
        return true;
      });
      await assert.rejects(
        loadServingTls({ certFile: join(work, "none"), keyFile: join(work, "none") }),
        /cannot read/,
      );
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });
});

describe("TLS from the environment", () => {
  test("tlsFromEnv: files, a Secret, nothing, and half-configured mistakes", () => {
    assert.equal(tlsFromEnv({}), undefined);
    assert.deepEqual(tlsFromEnv({ TLS_CERT_FILE: "/c", TLS_KEY_FILE: "/k" })?.source, {
      certFile: "/c",
      keyFile: "/k",
    });
    const fake = { get: async () => ({}) as never };
    const secret = tlsFromEnv(
      { TLS_SECRET_NAME: "s", TLS_SECRET_NAMESPACE: "n", TLS_RELOAD_INTERVAL_SECONDS: "5" },
      { kube: () => fake },
    );
    assert.deepEqual(secret?.source, { secret: { name: "s", namespace: "n" }, kube: fake });
    assert.equal(secret?.reloadIntervalMs, 5000);
    assert.throws(() => tlsFromEnv({ TLS_CERT_FILE: "/c" }), /must be set together/);
    assert.throws(() => tlsFromEnv({ TLS_SECRET_NAME: "s" }), /must be set together/);
    assert.throws(
      () =>
        tlsFromEnv({
          TLS_CERT_FILE: "/c",
          TLS_KEY_FILE: "/k",
          TLS_SECRET_NAME: "s",
          TLS_SECRET_NAMESPACE: "n",
        }),
      /not both/,
    );
    assert.throws(
      () => tlsFromEnv({ TLS_CERT_FILE: "/c", TLS_KEY_FILE: "/k", TLS_RELOAD_INTERVAL_SECONDS: "0" }),
      /1\.\.86400/,
    );
  });

  test("a function process with TLS_CERT_FILE/TLS_KEY_FILE serves HTTPS and says so in its ready line", async () => {
    const child = spawn(process.execPath, [fixture], {
      cwd: repoRoot,
      env: {
        ...process.env,
        PORT: "0",
        LOG_LEVEL: "warn",
        TLS_CERT_FILE: join(dir, "tls.crt"),
        TLS_KEY_FILE: join(dir, "tls.key"),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      err += d;
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      await waitFor(`the ready line (stderr: ${err})`, async () => out.includes("\n"));
      const ready = JSON.parse(out.trim()) as { url: string };
      assert.match(ready.url, /^https:\/\/127\.0\.0\.1:\d+$/);
      const res = await httpsFetch(`${ready.url}/`, { ca, method: "POST", body: "{}" });
      assert.equal(res.status, 200);
    } finally {
      child.kill("SIGTERM");
    }
    assert.equal(await exited, 0);
  });

  test("a function process with half a TLS configuration refuses to start", async () => {
    const child = spawn(process.execPath, [fixture], {
      cwd: repoRoot,
      env: { ...process.env, PORT: "0", TLS_CERT_FILE: join(dir, "tls.crt") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      err += d;
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
    assert.notEqual(code, 0);
    assert.equal(out, "");
    assert.match(err, /TLS_CERT_FILE and TLS_KEY_FILE must be set together/);
  });
});
