import assert from "node:assert/strict";
import { createPrivateKey, X509Certificate } from "node:crypto";
import type { AddressInfo } from "node:net";
import { describe, test } from "node:test";
import { connect, createServer, type TLSSocket } from "node:tls";
import { bundleContains, rotatedBundle } from "../../shared/tls/bundle.ts";
import {
  certificateExpiry,
  generateCertificates,
  needsRenewal,
  serviceDnsNames,
  splitPemBundle,
  subjectAltNames,
} from "../../shared/tls/certificates.ts";
import { renewalReason } from "../../shared/tls/check.ts";

const DAY = 24 * 60 * 60_000;
const certs = generateCertificates({
  service: "webhook",
  namespace: "storage",
  extraDnsNames: ["localhost", "127.0.0.1", "::1"],
  validDays: 90,
});

/** A TLS handshake against a server with `cert`/`key`, from a client trusting only `ca`. */
async function handshake(
  cert: string,
  key: string,
  ca: string,
  /** Undefined: the client checks the IP it connected to (127.0.0.1) against the IP SANs. */
  servername: string | undefined,
): Promise<{ ok: true } | { ok: false; error: string }> {
  const server = createServer({ cert, key }, (socket) => socket.end());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  try {
    return await new Promise((resolve) => {
      const socket: TLSSocket = connect(
        { host: "127.0.0.1", port, ca, ...(servername ? { servername } : {}) },
        () => {
          socket.end();
          resolve({ ok: true });
        },
      );
      socket.on("error", (err) =>
        resolve({ ok: false, error: (err as NodeJS.ErrnoException).code ?? err.message }),
      );
    });
  } finally {
    server.close();
  }
}

describe("generateCertificates", () => {
  const leaf = new X509Certificate(certs.cert);
  const ca = new X509Certificate(certs.caCert);

  test("the serving certificate names every spelling of the Service, plus the extras as DNS and IP SANs", () => {
    assert.deepEqual(serviceDnsNames("webhook", "storage"), [
      "webhook",
      "webhook.storage",
      "webhook.storage.svc",
      "webhook.storage.svc.cluster.local",
    ]);
    assert.equal(
      leaf.subjectAltName,
      "DNS:webhook, DNS:webhook.storage, DNS:webhook.storage.svc, DNS:webhook.storage.svc.cluster.local, " +
        "DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1",
    );
    assert.equal(leaf.checkHost("webhook.storage.svc", { subject: "never" }), "webhook.storage.svc");
    assert.equal(leaf.checkIP("127.0.0.1"), "127.0.0.1");
    assert.equal(leaf.checkHost("other.storage.svc", { subject: "never" }), undefined);
    assert.match(leaf.subject, /CN=webhook\.storage\.svc/);
  });

  test("the CA signed the serving certificate; one is a CA, the other a server certificate", () => {
    assert.equal(ca.ca, true);
    assert.equal(leaf.ca, false);
    assert.ok(leaf.checkIssued(ca));
    assert.ok(leaf.verify(ca.publicKey));
    assert.ok(ca.verify(ca.publicKey), "self-signed root");
    assert.deepEqual(leaf.keyUsage, ["1.3.6.1.5.5.7.3.1"], "extended key usage serverAuth");
    assert.ok(leaf.checkPrivateKey(createPrivateKey(certs.key)));
    assert.ok(ca.checkPrivateKey(createPrivateKey(certs.caKey)));
    assert.notEqual(leaf.serialNumber, ca.serialNumber);
  });

  test("validity: backdated a little, valid for validDays", () => {
    const expiry = certificateExpiry(certs.cert).getTime();
    assert.ok(Math.abs(expiry - (Date.now() + 90 * DAY)) < 60_000);
    assert.ok(leaf.validFromDate.getTime() < Date.now() - 60_000);
  });

  test("a client trusting only the CA completes a handshake for the Service name and the IP SAN", async () => {
    assert.deepEqual(await handshake(certs.cert, certs.key, certs.caCert, "webhook.storage.svc"), {
      ok: true,
    });
    assert.deepEqual(
      await handshake(certs.cert, certs.key, certs.caCert, "webhook.storage.svc.cluster.local"),
      { ok: true },
    );
    assert.deepEqual(await handshake(certs.cert, certs.key, certs.caCert, undefined), { ok: true });
    const noIp = generateCertificates({ service: "webhook", namespace: "storage", validDays: 1 });
    assert.deepEqual(await handshake(noIp.cert, noIp.key, noIp.caCert, undefined), {
      ok: false,
      error: "ERR_TLS_CERT_ALTNAME_INVALID",
    });
  });

  test("the handshake fails for a name the certificate does not cover, and against another CA", async () => {
    const wrongName = await handshake(certs.cert, certs.key, certs.caCert, "webhook.other.svc");
    assert.deepEqual(wrongName, { ok: false, error: "ERR_TLS_CERT_ALTNAME_INVALID" });
    const other = generateCertificates({ service: "webhook", namespace: "storage", validDays: 1 });
    const wrongCa = await handshake(certs.cert, certs.key, other.caCert, "webhook.storage.svc");
    assert.equal(wrongCa.ok, false);
  });

  test("rejects names that cannot be SANs and bad inputs", () => {
    assert.throws(() => generateCertificates({ service: "Web_Hook", namespace: "x" }), /DNS-1123 label/);
    assert.throws(
      () => subjectAltNames({ service: "a", namespace: "b", extraDnsNames: ["not a name"] }),
      /not a DNS name or IP address/,
    );
    assert.throws(() => generateCertificates({ service: "a", namespace: "b", validDays: 0 }), /validDays/);
  });
});

describe("renewal", () => {
  test("needsRenewal: within the window, expired, not yet valid, or unparsable", () => {
    const now = new Date();
    assert.equal(needsRenewal(certs.cert, { before: 30, now }), false);
    assert.equal(needsRenewal(certs.cert, { before: 91, now }), true);
    assert.equal(needsRenewal(certs.cert, { before: 30, now: new Date(now.getTime() + 70 * DAY) }), true);
    assert.equal(needsRenewal(certs.cert, { before: 0, now: new Date(now.getTime() + 100 * DAY) }), true);
    assert.equal(needsRenewal(certs.cert, { before: 30, now: new Date(now.getTime() - DAY) }), true);
    assert.equal(needsRenewal("not a certificate", { before: 30 }), true);
  });

  test("renewalReason names what is wrong, and nothing for a good certificate", () => {
    const want = { dnsNames: serviceDnsNames("webhook", "storage"), ips: ["127.0.0.1"], renewBeforeDays: 30 };
    const good = { cert: certs.cert, key: certs.key, caCert: certs.caCert };
    assert.equal(renewalReason(good, want), undefined);
    assert.equal(renewalReason({}, want), "no certificate yet");
    assert.equal(renewalReason({ ...good, caCert: undefined }, want), "the CA certificate is missing");
    assert.match(
      renewalReason(good, { ...want, renewBeforeDays: 100 }) ?? "",
      /^it expires .*, within 100 days$/,
    );
    const other = generateCertificates({ service: "webhook", namespace: "storage" });
    assert.equal(
      renewalReason({ ...good, key: other.key }, want),
      "the key does not belong to the certificate",
    );
    assert.equal(
      renewalReason({ ...good, caCert: other.caCert }, want),
      "the certificate is not signed by the CA",
    );
    assert.equal(
      renewalReason(good, { ...want, dnsNames: [...want.dnsNames, "webhook.moved.svc"], ips: ["10.0.0.1"] }),
      "it does not cover webhook.moved.svc, 10.0.0.1",
    );
  });
});

describe("caBundle rotation", () => {
  const next = generateCertificates({ service: "webhook", namespace: "storage" });

  test("a rotated bundle holds the new CA first, then the previous one, without duplicates", () => {
    const bundle = rotatedBundle(next.caCert, [certs.caCert, next.caCert]);
    const entries = splitPemBundle(bundle);
    assert.equal(entries.length, 2);
    assert.equal(
      new X509Certificate(entries[0]!).fingerprint256,
      new X509Certificate(next.caCert).fingerprint256,
    );
    assert.ok(bundleContains(bundle, certs.caCert));
    assert.ok(bundleContains(bundle, next.caCert));
    assert.equal(bundleContains(next.caCert, certs.caCert), false);
  });

  test("expired and unparsable previous CAs are dropped", () => {
    const later = new Date(Date.now() + 200 * DAY);
    const fresh = generateCertificates({ service: "webhook", namespace: "storage", validDays: 365 });
    assert.equal(splitPemBundle(rotatedBundle(fresh.caCert, [certs.caCert], later)).length, 1);
    assert.equal(splitPemBundle(rotatedBundle(fresh.caCert, ["garbage"])).length, 1);
  });
});
