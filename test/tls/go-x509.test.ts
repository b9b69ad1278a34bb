// Our certificates against Go's x509 parser rules (shared/tls/go-x509.ts):
// kube-apiserver is a Go program, and a certificate Go refuses fails every
// webhook call however happily OpenSSL takes it.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { describe, test } from "node:test";
import forge from "node-forge";
import { generateCertificates } from "../../shared/tls/certificates.ts";
import { renewalReason } from "../../shared/tls/check.ts";
import { TAG } from "../../shared/tls/der.ts";
import {
  goParseError,
  parseGoCertificate,
  pemCertificates,
  rfc5280Problems,
} from "../../shared/tls/go-x509.ts";

const { privateKey } = generateKeyPairSync("rsa", {
  modulusLength: 2048,
  privateKeyEncoding: { type: "pkcs8", format: "pem" },
  publicKeyEncoding: { type: "spki", format: "pem" },
});
const key = forge.pki.privateKeyFromPem(privateKey) as forge.pki.rsa.PrivateKey;
const publicKey = forge.pki.rsa.setPublicKey(key.n, key.e);

interface Made {
  subject?: forge.pki.CertificateField[];
  issuer?: forge.pki.CertificateField[];
  serial?: string;
  notAfter?: Date;
  extensions?: object[];
}

/** A self-signed certificate built with node-forge, with whatever a test gets wrong on purpose. */
function make(o: Made = {}): string {
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  cert.serialNumber = o.serial ?? "01";
  cert.validity.notBefore = new Date("2025-01-01T00:00:00Z");
  cert.validity.notAfter = o.notAfter ?? new Date("2035-01-01T00:00:00Z");
  const subject = o.subject ?? [{ name: "commonName", value: "test" }];
  cert.setSubject(subject);
  cert.setIssuer(o.issuer ?? subject);
  cert.setExtensions(o.extensions ?? [{ name: "basicConstraints", cA: false }]);
  cert.sign(key, forge.md.sha256.create());
  return forge.pki.certificateToPem(cert);
}

/** The universal tag of the first attribute value of the subject. */
function subjectValueTag(pem: string): number {
  return Number(forge.pki.certificateFromPem(pem).subject.attributes[0]!.valueTagClass);
}

/** The same certificate with one run of bytes replaced (same length; the signature no longer matters to a parser). */
function patched(pem: string, from: number[], to: number[]): string {
  const der = pemCertificates(pem)[0]!;
  const at = der.indexOf(Buffer.from(from));
  assert.ok(at > 0, "the bytes to patch are in the certificate");
  Buffer.from(to).copy(der, at);
  return `-----BEGIN CERTIFICATE-----\n${der.toString("base64")}\n-----END CERTIFICATE-----\n`;
}

const printableRefusal = "x509: invalid RDNSequence: invalid attribute value: invalid PrintableString";

describe("generateCertificates passes Go's x509 parser", () => {
  const certs = generateCertificates({
    service: "webhook",
    namespace: "storage",
    extraDnsNames: ["localhost", "127.0.0.1", "::1"],
  });

  test("CA and serving certificate parse, with no RFC 5280 problem, and the CA's '@' is in a UTF8String", () => {
    for (const pem of [certs.caCert, certs.cert]) {
      assert.equal(goParseError(pem), undefined);
      assert.deepEqual(rfc5280Problems(parseGoCertificate(pemCertificates(pem)[0]!)), []);
    }
    const ca = parseGoCertificate(pemCertificates(certs.caCert)[0]!);
    assert.match(ca.subjectCommonName, /^webhook-ca@\d+$/);
    assert.equal(subjectValueTag(certs.caCert), TAG.UTF8_STRING);
    assert.ok(ca.isCA && ca.basicConstraintsValid);
    assert.equal(ca.keyUsage & 32, 32, "keyCertSign");
  });

  test("the serving certificate names the Service in DNS SANs and the IPs in IP SANs, for serverAuth", () => {
    const leaf = parseGoCertificate(pemCertificates(certs.cert)[0]!);
    assert.deepEqual(leaf.dnsNames, [
      "webhook",
      "webhook.storage",
      "webhook.storage.svc",
      "webhook.storage.svc.cluster.local",
      "localhost",
    ]);
    assert.deepEqual(leaf.ipAddresses, ["127.0.0.1", "::1"]);
    assert.deepEqual(leaf.extKeyUsage, ["1.3.6.1.5.5.7.3.1"]);
    assert.equal(leaf.isCA, false);
    assert.equal(leaf.serial.length, 16);
    assert.equal(leaf.serial[0]! & 0x80, 0, "positive");
  });

  test("a lifetime reaching past 2049 ends in a GeneralizedTime, as RFC 5280 asks", () => {
    const long = generateCertificates({ service: "a", namespace: "b", validDays: 36_500 });
    const leaf = parseGoCertificate(pemCertificates(long.cert)[0]!);
    assert.deepEqual(leaf.validityTags, [TAG.UTC_TIME, TAG.GENERALIZED_TIME]);
    assert.deepEqual(rfc5280Problems(leaf), []);
  });
});

describe("what Go refuses", () => {
  test("a CA named the way npm run certs used to name it (node-forge's PrintableString) is refused, and so is every certificate it issues", () => {
    const name = [{ name: "commonName", value: "kube-storage-functions-admission-ca@1764110000" }];
    const ca = make({ subject: name });
    assert.equal(subjectValueTag(ca), TAG.PRINTABLE_STRING);
    assert.equal(goParseError(ca), printableRefusal);
    // The leaf's own subject is fine, but its issuer repeats the CA's name.
    const leaf = make({ subject: [{ name: "commonName", value: "hooks.webhooks.svc" }], issuer: name });
    assert.equal(goParseError(leaf), printableRefusal);
  });

  test("the PrintableString set is Go's: A-Z a-z 0-9 space ' ( ) + , - . / : = ?, plus '*' and '&'", () => {
    for (const ok of ["Aa0 '()+,-./:=?", "*.example.com", "R&D"])
      assert.equal(goParseError(make({ subject: [{ name: "commonName", value: ok }] })), undefined, ok);
    for (const bad of ["a@b", "a_b", "a!b", "a#b", "a<b", "a;b", 'a"b'])
      assert.equal(
        goParseError(make({ subject: [{ name: "commonName", value: bad }] })),
        printableRefusal,
        bad,
      );
  });

  test("other string types are checked as Go checks them", () => {
    const value = (v: string, type: number) => ({
      name: "commonName",
      value: v,
      valueTagClass: type as unknown as forge.asn1.Class,
    });
    const cases: [string, number, string | undefined][] = [
      ["a@b", TAG.UTF8_STRING, undefined],
      ["a@b", TAG.IA5_STRING, undefined],
      ["caf\xe9", TAG.IA5_STRING, "invalid IA5String"],
      ["123 4", TAG.NUMERIC_STRING, undefined],
      ["12a", TAG.NUMERIC_STRING, "invalid NumericString"],
      ["abc", TAG.BMP_STRING, undefined],
      ["anything@", TAG.T61_STRING, undefined],
      ["\x01", TAG.INTEGER, "unsupported string type: 2"],
    ];
    for (const [text, type, error] of cases) {
      const got = goParseError(make({ subject: [value(text, type)] }));
      assert.equal(
        got,
        error === undefined ? undefined : `x509: invalid RDNSequence: invalid attribute value: ${error}`,
        `${JSON.stringify(text)} as tag ${type}`,
      );
    }
    // node-forge encodes UTF8String and BMPString values itself; bad ones need the bytes changed afterwards.
    const base = make({ subject: [value("QQQ", TAG.PRINTABLE_STRING)] });
    const from = [TAG.PRINTABLE_STRING, 3, 0x51, 0x51, 0x51];
    assert.equal(
      goParseError(patched(base, from, [TAG.UTF8_STRING, 3, 0x61, 0xff, 0xfe])),
      "x509: invalid RDNSequence: invalid attribute value: invalid UTF-8 string",
    );
    assert.equal(
      goParseError(patched(base, from, [TAG.BMP_STRING, 3, 0, 0x61, 0])),
      "x509: invalid RDNSequence: invalid attribute value: invalid BMPString",
    );
  });

  test("SANs: a non-ASCII DNS name and an IP of the wrong length are refused", () => {
    const san = (altNames: object[]) => make({ extensions: [{ name: "subjectAltName", altNames }] });
    assert.equal(
      goParseError(san([{ type: 2, value: "b\xfccher.example" }])),
      "x509: SAN dNSName is malformed",
    );
    assert.equal(
      goParseError(san([{ type: 7, value: "\x01\x02\x03\x04\x05" }])),
      "x509: cannot parse IP address of length 5",
    );
    assert.equal(
      goParseError(
        san([
          { type: 2, value: "ok.example" },
          { type: 7, ip: "10.0.0.1" },
        ]),
      ),
      undefined,
    );
  });

  test("a negative serial is refused (Go 1.23+); a zero or too long serial is an RFC 5280 problem", () => {
    assert.equal(goParseError(make({ serial: "ff01" })), "x509: negative serial number");
    const zero = parseGoCertificate(pemCertificates(make({ serial: "00" }))[0]!);
    assert.deepEqual(rfc5280Problems(zero), ["the serial number is not positive"]);
    const long = parseGoCertificate(pemCertificates(make({ serial: `01${"ab".repeat(20)}` }))[0]!);
    assert.deepEqual(rfc5280Problems(long), ["the serial number is 21 octets; at most 20"]);
  });

  test("an empty subject without a critical SAN, and a CA that may not sign certificates, are RFC 5280 problems", () => {
    const empty = parseGoCertificate(pemCertificates(make({ subject: [] }))[0]!);
    assert.deepEqual(rfc5280Problems(empty), [
      "the subject is empty and no critical subjectAltName names the certificate",
    ]);
    const signless = make({
      extensions: [
        { name: "basicConstraints", cA: true },
        { name: "keyUsage", digitalSignature: true },
      ],
    });
    assert.deepEqual(rfc5280Problems(parseGoCertificate(pemCertificates(signless)[0]!)), [
      "a CA certificate without keyUsage keyCertSign",
    ]);
  });

  test("DER that is not a certificate, or is cut short, is a malformed certificate", () => {
    const der = pemCertificates(make())[0]!;
    const pem = (bytes: Buffer) =>
      `-----BEGIN CERTIFICATE-----\n${bytes.toString("base64")}\n-----END CERTIFICATE-----\n`;
    assert.equal(goParseError(pem(der.subarray(0, der.length - 1))), "x509: malformed certificate");
    assert.equal(goParseError(pem(Buffer.from([0x30, 0x80, 0, 0]))), "x509: malformed certificate");
    assert.equal(goParseError(pem(Buffer.concat([der, Buffer.from([0])]))), "x509: malformed certificate");
    assert.equal(goParseError("not a pem"), "no PEM certificate");
  });
});

describe("renewalReason", () => {
  test("a certificate pair Go would refuse is renewed, whatever its expiry", () => {
    const good = generateCertificates({ service: "hooks", namespace: "webhooks" });
    const name = [{ name: "commonName", value: "hooks-ca@1764110000" }];
    const options = { dnsNames: [], ips: [], renewBeforeDays: 30 };
    assert.equal(renewalReason(good, { ...options, dnsNames: ["hooks.webhooks.svc"] }), undefined);
    const reason = renewalReason({ ...good, caCert: make({ subject: name }) }, options);
    assert.equal(
      reason,
      `the CA certificate would be refused by kube-apiserver's x509 parser (${printableRefusal})`,
    );
  });
});
