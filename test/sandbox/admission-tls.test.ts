// Go's verification of a webhook's certificates (sandbox/apiserver/admission-tls.ts)
// as a table: certificates in, Go's refusal (or none) out, at a fixed time.
// The texts were checked against kube-apiserver v1.20.2 (Go 1.19), which
// prints the same x509 words without the "tls: failed to verify
// certificate: " that Go 1.20 added.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { describe, test } from "node:test";
import forge from "node-forge";
import { goRootPool, goVerifyServer } from "../../sandbox/apiserver/admission-tls.ts";
import { pemCertificates } from "../../shared/tls/go-x509.ts";
import { printableStringCertificates } from "../tls/helpers.ts";

const NOW = new Date("2026-06-01T12:00:00Z");
const DAY = 86_400_000;
const utf8 = forge.asn1.Type.UTF8 as unknown as forge.asn1.Class;

function keys() {
  const { privateKey } = generateKeyPairSync("rsa", {
    modulusLength: 2048,
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
    publicKeyEncoding: { type: "spki", format: "pem" },
  });
  const key = forge.pki.privateKeyFromPem(privateKey) as forge.pki.rsa.PrivateKey;
  return { key, publicKey: forge.pki.rsa.setPublicKey(key.n, key.e) };
}
const caKeys = keys();
const otherKeys = keys();
const leafKeys = keys();

interface Made {
  name: string;
  issuer?: string;
  signer?: forge.pki.rsa.PrivateKey;
  publicKey?: forge.pki.rsa.PublicKey;
  notBefore?: Date;
  notAfter?: Date;
  extensions: object[];
}

function make(o: Made): Buffer {
  const cert = forge.pki.createCertificate();
  cert.publicKey = o.publicKey ?? leafKeys.publicKey;
  cert.serialNumber = "1f";
  cert.validity.notBefore = o.notBefore ?? new Date(NOW.getTime() - DAY);
  cert.validity.notAfter = o.notAfter ?? new Date(NOW.getTime() + DAY);
  cert.setSubject([{ name: "commonName", value: o.name, valueTagClass: utf8 }]);
  cert.setIssuer([{ name: "commonName", value: o.issuer ?? "test-ca", valueTagClass: utf8 }]);
  cert.setExtensions(o.extensions);
  cert.sign(o.signer ?? caKeys.key, forge.md.sha256.create());
  return pemCertificates(forge.pki.certificateToPem(cert))[0]!;
}

const caExtensions = [
  { name: "basicConstraints", cA: true, critical: true },
  { name: "keyUsage", keyCertSign: true, critical: true },
];
const ca = (o: Partial<Made> = {}) =>
  make({ name: "test-ca", publicKey: caKeys.publicKey, extensions: caExtensions, ...o });
const leaf = (altNames: object[] | undefined, o: Partial<Made> = {}) =>
  make({
    name: o.name ?? "hooks.webhooks.svc",
    extensions: [
      { name: "basicConstraints", cA: false },
      { name: "extKeyUsage", serverAuth: true },
      ...(altNames ? [{ name: "subjectAltName", altNames }] : []),
    ],
    ...o,
  });
const pool = (...ders: Buffer[]) =>
  goRootPool(
    ders
      .map((d) => `-----BEGIN CERTIFICATE-----\n${d.toString("base64")}\n-----END CERTIFICATE-----\n`)
      .join(""),
  ).roots;

const svc = [{ type: 2, value: "hooks.webhooks.svc" }];
const verify = "tls: failed to verify certificate: ";

describe("goVerifyServer", () => {
  const cases: { name: string; chain: Buffer[]; roots: Buffer[]; host: string; want: string | undefined }[] =
    [
      {
        name: "a good chain",
        chain: [leaf(svc)],
        roots: [ca()],
        host: "hooks.webhooks.svc",
        want: undefined,
      },
      {
        name: "a wildcard SAN covers one label, not two",
        chain: [leaf([{ type: 2, value: "*.webhooks.svc" }])],
        roots: [ca()],
        host: "a.b.webhooks.svc",
        want: `${verify}x509: certificate is valid for *.webhooks.svc, not a.b.webhooks.svc`,
      },
      {
        name: "IPv6 in brackets matches an IP SAN",
        chain: [leaf([{ type: 7, ip: "::1" }])],
        roots: [ca()],
        host: "[::1]",
        want: undefined,
      },
      {
        name: "expired and misnamed: Go reports the expiry first",
        chain: [leaf(svc, { notAfter: new Date(NOW.getTime() - 1000) })],
        roots: [ca()],
        host: "other.webhooks.svc",
        want: `${verify}x509: certificate has expired or is not yet valid: current time 2026-06-01T12:00:00Z is after 2026-06-01T11:59:59Z`,
      },
      {
        name: "not valid yet",
        chain: [leaf(svc, { notBefore: new Date(NOW.getTime() + 60_000) })],
        roots: [ca()],
        host: "hooks.webhooks.svc",
        want: `${verify}x509: certificate has expired or is not yet valid: current time 2026-06-01T12:00:00Z is before 2026-06-01T12:01:00Z`,
      },
      {
        name: "misnamed and untrusted: Go reports the name first",
        chain: [leaf(svc)],
        roots: [],
        host: "other.webhooks.svc",
        want: `${verify}x509: certificate is valid for hooks.webhooks.svc, not other.webhooks.svc`,
      },
      {
        name: "a CN that matches counts for nothing without SANs",
        chain: [leaf(undefined)],
        roots: [ca()],
        host: "hooks.webhooks.svc",
        want: `${verify}x509: certificate relies on legacy Common Name field, use SANs instead`,
      },
      {
        name: "no SANs and a CN that does not match either",
        chain: [leaf(undefined)],
        roots: [ca()],
        host: "other.webhooks.svc",
        want: `${verify}x509: certificate is not valid for any names, but wanted to match other.webhooks.svc`,
      },
      {
        name: "an expired CA: unknown authority, with Go's hint",
        chain: [leaf(svc)],
        roots: [ca({ notAfter: new Date(NOW.getTime() - DAY) })],
        host: "hooks.webhooks.svc",
        want: `${verify}x509: certificate signed by unknown authority (possibly because of "x509: certificate has expired or is not yet valid: current time 2026-06-01T12:00:00Z is after 2026-05-31T12:00:00Z" while trying to verify candidate authority certificate "test-ca")`,
      },
      {
        name: "a CA of the same name with another key",
        chain: [leaf(svc)],
        roots: [ca({ publicKey: otherKeys.publicKey, signer: otherKeys.key })],
        host: "hooks.webhooks.svc",
        want: `${verify}x509: certificate signed by unknown authority (possibly because of "crypto/rsa: verification error" while trying to verify candidate authority certificate "test-ca")`,
      },
      {
        name: "an issuer that is not a CA",
        chain: [leaf(svc)],
        roots: [ca({ extensions: [{ name: "basicConstraints", cA: false }] })],
        host: "hooks.webhooks.svc",
        want: `${verify}x509: certificate signed by unknown authority (possibly because of "x509: invalid signature: parent certificate cannot sign this kind of certificate" while trying to verify candidate authority certificate "test-ca")`,
      },
      {
        name: "through an intermediate the server sends",
        chain: [
          leaf(svc, { issuer: "intermediate", signer: otherKeys.key }),
          ca({ name: "intermediate", publicKey: otherKeys.publicKey }),
        ],
        roots: [ca()],
        host: "hooks.webhooks.svc",
        want: undefined,
      },
      {
        name: "an unhandled critical extension",
        chain: [
          make({
            name: "x",
            extensions: [
              { name: "subjectAltName", altNames: svc },
              {
                id: "1.2.3.4.5",
                critical: true,
                value: forge.asn1.toDer(forge.asn1.create(0, 5, false, "")).getBytes(),
              },
            ],
          }),
        ],
        roots: [ca()],
        host: "hooks.webhooks.svc",
        want: `${verify}x509: unhandled critical extension`,
      },
    ];
  for (const c of cases) {
    test(c.name, () => {
      assert.equal(
        goVerifyServer({ chain: c.chain, roots: pool(...c.roots), host: c.host, now: NOW }),
        c.want,
      );
    });
  }

  test("a certificate Go cannot parse fails before anything else is looked at", () => {
    const old = printableStringCertificates("hooks", "webhooks", ["hooks.webhooks.svc"]);
    assert.equal(
      goVerifyServer({ chain: pemCertificates(old.cert), roots: [], host: "elsewhere", now: NOW }),
      "tls: failed to parse certificate from server: x509: invalid RDNSequence: invalid attribute value: invalid PrintableString",
    );
  });
});

describe("goRootPool", () => {
  test("keeps what Go can parse and drops the rest, as CertPool.AppendCertsFromPEM does", () => {
    const old = printableStringCertificates("hooks", "webhooks", ["hooks.webhooks.svc"]);
    const good = `-----BEGIN CERTIFICATE-----\n${ca().toString("base64")}\n-----END CERTIFICATE-----\n`;
    const kept = goRootPool(`${old.caCert}${good}`);
    assert.equal(kept.pem.length, 1);
    assert.equal(kept.roots[0]!.subjectCommonName, "test-ca");
    assert.deepEqual(goRootPool(old.caCert), { pem: [], roots: [] });
  });
});
