// Reading a certificate the way Go's crypto/x509 reads it, with Go's error
// texts. kube-apiserver is a Go program: a certificate Go refuses to parse
// (e.g. an '@' in a PrintableString) fails every webhook call, although
// OpenSSL, and so Node, accept it. `npm run certs` and the sandbox's webhook
// client check certificates with this, so such a certificate never gets as
// far as a real cluster.
//
// Besides Go's refusals, rfc5280Problems lists what RFC 5280 asks of a
// certificate that Go tolerates today (serial length, time encodings), which
// our own generator must still get right.

import { isIP } from "node:net";
import { DerReader, decodeBitString, type Element, isMinimalInteger, TAG } from "./der.ts";

export class GoX509Error extends Error {
  override name = "GoX509Error";
}

/** What a certificate's extensions say, as Go's processExtensions reads them. */
interface Extensions {
  hasSanExtension: boolean;
  sanCritical: boolean;
  dnsNames: string[];
  /** As Go prints them (net.IP.String()). */
  ipAddresses: string[];
  basicConstraintsValid: boolean;
  isCA: boolean;
  /** Go's KeyUsage bits (digitalSignature = 1, ..., keyCertSign = 32), 0 when the extension is absent. */
  keyUsage: number;
  /** Dotted OIDs of extKeyUsage; empty when the extension is absent. */
  extKeyUsage: string[];
  /** Critical extensions Go does not handle: Verify fails with "x509: unhandled critical extension". */
  unhandledCritical: string[];
}

/** The fields of a certificate that Go's verification reads. */
export interface GoCertificate extends Extensions {
  raw: Buffer;
  rawIssuer: Buffer;
  rawSubject: Buffer;
  version: number;
  /** Content octets of the serial number INTEGER (two's complement). */
  serial: Buffer;
  subjectCommonName: string;
  subjectOrganization: string | undefined;
  /** The number of attributes in the subject; 0 for an empty subject. */
  subjectAttributes: number;
  notBefore: Date;
  notAfter: Date;
  /** The ASN.1 time types of notBefore and notAfter. */
  validityTags: [number, number];
}

export const KEY_USAGE_CERT_SIGN = 1 << 5;
export const EKU_ANY = "2.5.29.37.0";
export const EKU_SERVER_AUTH = "1.3.6.1.5.5.7.3.1";

const OID_COMMON_NAME = "2.5.4.3";
const OID_ORGANIZATION = "2.5.4.10";
// The extensions Go's processExtensions understands; other critical ones are "unhandled".
const HANDLED_EXTENSIONS = new Set([
  "2.5.29.14",
  "2.5.29.15",
  "2.5.29.17",
  "2.5.29.19",
  "2.5.29.30",
  "2.5.29.31",
  "2.5.29.32",
  "2.5.29.35",
  "2.5.29.37",
  "1.3.6.1.5.5.7.1.1",
]);

/** A reader over the content of `reader`'s next element, which must have `tag`; Go's `error` otherwise. */
function enter(reader: DerReader, tag: number, error: string): DerReader {
  const element = reader.read(tag);
  if (element === undefined) fail(error);
  return new DerReader(element.content);
}

/** An optional BOOLEAN DEFAULT FALSE, which DER writes as exactly 0x00 or 0xff; Go's `error` otherwise. */
function optionalBoolean(reader: DerReader, error: string): boolean {
  if (reader.peekTag() !== TAG.BOOLEAN) return false;
  const flag = reader.readAny();
  if (flag?.content.length !== 1 || (flag.content[0] !== 0 && flag.content[0] !== 0xff)) fail(error);
  return flag.content[0] === 0xff;
}

function fail(message: string): never {
  throw new GoX509Error(message);
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

// Go's isPrintable: the ASN.1 PrintableString set, plus '*' and '&' that Go
// tolerates because real certificates carry them. '@', '_', '!' and the like are refused.
function isGoPrintable(byte: number): boolean {
  return (
    (byte >= 0x61 && byte <= 0x7a) || // a-z
    (byte >= 0x41 && byte <= 0x5a) || // A-Z
    (byte >= 0x30 && byte <= 0x39) || // 0-9
    (byte >= 0x27 && byte <= 0x29) || // ' ( )
    (byte >= 0x2b && byte <= 0x2f) || // + , - . /
    byte === 0x20 ||
    byte === 0x3a || // :
    byte === 0x3d || // =
    byte === 0x3f || // ?
    byte === 0x2a || // *
    byte === 0x26 // &
  );
}

function isAscii(bytes: Buffer): boolean {
  // Go decodes the string as UTF-8 and wants every rune <= 127: any byte >= 0x80 fails.
  for (const byte of bytes) if (byte > 0x7f) return false;
  return true;
}

/** Go's parseASN1String: the string types an attribute value may have, each checked. */
export function parseAsn1String(tag: number, value: Buffer): string {
  switch (tag) {
    case TAG.T61_STRING:
      return value.toString("latin1");
    case TAG.PRINTABLE_STRING:
      for (const byte of value) if (!isGoPrintable(byte)) fail("invalid PrintableString");
      return value.toString("latin1");
    case TAG.UTF8_STRING:
      try {
        return utf8.decode(value);
      } catch {
        return fail("invalid UTF-8 string");
      }
    case TAG.BMP_STRING: {
      if (value.length % 2 !== 0) fail("invalid BMPString");
      const units: number[] = [];
      for (let i = 0; i + 1 < value.length; i += 2) units.push((value[i]! << 8) | value[i + 1]!);
      if (units.at(-1) === 0) units.pop();
      return String.fromCharCode(...units);
    }
    case TAG.IA5_STRING:
      if (!isAscii(value)) fail("invalid IA5String");
      return value.toString("latin1");
    case TAG.NUMERIC_STRING:
      for (const byte of value)
        if (!((byte >= 0x30 && byte <= 0x39) || byte === 0x20)) fail("invalid NumericString");
      return value.toString("latin1");
  }
  return fail(`unsupported string type: ${tag}`);
}

interface ParsedName {
  commonName: string;
  organization: string | undefined;
  attributes: number;
}

/** Go's parseName over an RDNSequence (the content of the Name SEQUENCE). */
function parseName(content: Buffer): ParsedName {
  const rdns = new DerReader(content);
  const name: ParsedName = { commonName: "", organization: undefined, attributes: 0 };
  while (!rdns.empty()) {
    const atvs = enter(rdns, TAG.SET, "x509: invalid RDNSequence");
    while (!atvs.empty()) {
      const parts = enter(atvs, TAG.SEQUENCE, "x509: invalid RDNSequence: invalid attribute");
      const oid = parts.readOid();
      if (oid === undefined) fail("x509: invalid RDNSequence: invalid attribute type");
      const value = parts.readAny();
      if (value === undefined) fail("x509: invalid RDNSequence: invalid attribute value");
      let text: string;
      try {
        text = parseAsn1String(value.tag, value.content);
      } catch (err) {
        return fail(`x509: invalid RDNSequence: invalid attribute value: ${(err as Error).message}`);
      }
      name.attributes++;
      if (oid === OID_COMMON_NAME) name.commonName = text;
      if (oid === OID_ORGANIZATION && name.organization === undefined) name.organization = text;
    }
  }
  return name;
}

function twoDigits(text: string, at: number): number {
  return Number(text.slice(at, at + 2));
}

/** UTCTime (YYMMDDHHMM[SS]Z or ±hhmm) and GeneralizedTime (YYYYMMDDHHMMSSZ or ±hhmm), as cryptobyte reads them. */
function parseTime(element: Element | undefined): Date {
  if (element?.tag === TAG.UTC_TIME || element?.tag === TAG.GENERALIZED_TIME) {
    const utc = element.tag === TAG.UTC_TIME;
    const text = element.content.toString("latin1");
    const match = (
      utc ? /^(\d{2})(\d{8})(\d{2})?(Z|[+-]\d{4})$/ : /^(\d{4})(\d{8})(\d{2})(Z|[+-]\d{4})$/
    ).exec(text);
    const date = match && timeOf(match, utc);
    if (date === undefined || date === null)
      fail(utc ? "x509: malformed UTCTime" : "x509: malformed GeneralizedTime");
    return date;
  }
  return fail("x509: unsupported time format");
}

function timeOf(match: RegExpExecArray, utc: boolean): Date | undefined {
  const [, yearText, rest, secondsText, zone] = match as unknown as [
    string,
    string,
    string,
    string?,
    string?,
  ];
  let year = Number(yearText);
  if (utc) year += year >= 50 ? 1900 : 2000;
  const [month, day, hour, minute] = [0, 2, 4, 6].map((at) => twoDigits(rest, at)) as [
    number,
    number,
    number,
    number,
  ];
  const second = secondsText === undefined ? 0 : Number(secondsText);
  const ms = Date.UTC(year, month - 1, day, hour, minute, second);
  const check = new Date(ms);
  if (
    check.getUTCMonth() !== month - 1 ||
    check.getUTCDate() !== day ||
    hour > 23 ||
    minute > 59 ||
    second > 59
  )
    return undefined;
  let offset = 0;
  if (zone !== undefined && zone !== "Z") {
    const hours = Number(zone.slice(1, 3));
    const minutes = Number(zone.slice(3, 5));
    if (hours > 23 || minutes > 59 || (hours === 0 && minutes === 0)) return undefined; // Go prints +0000 as Z
    offset = (zone[0] === "-" ? -1 : 1) * (hours * 60 + minutes) * 60_000;
  }
  return new Date(ms - offset);
}

/** net.IP.String(): dotted IPv4, compressed IPv6. */
function ipString(bytes: Buffer): string {
  if (bytes.length === 4) return [...bytes].join(".");
  const mapped = bytes.subarray(0, 12).equals(Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]));
  if (mapped) return [...bytes.subarray(12)].join(".");
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  const text = new URL(`http://[${groups.join(":")}]/`).hostname;
  return text.slice(1, -1);
}

function parseSan(value: Buffer, ext: Extensions): boolean {
  const outer = new DerReader(value);
  const names = outer.read(TAG.SEQUENCE);
  if (names === undefined || !outer.empty()) fail("x509: invalid subject alternative names");
  const reader = new DerReader(names.content);
  let parsed = 0;
  while (!reader.empty()) {
    const name = reader.readAny();
    if (name === undefined) fail("x509: invalid subject alternative name");
    switch (name.tag ^ 0x80) {
      case 1:
        if (!isAscii(name.content)) fail("x509: SAN rfc822Name is malformed");
        parsed++;
        break;
      case 2:
        if (!isAscii(name.content)) fail("x509: SAN dNSName is malformed");
        ext.dnsNames.push(name.content.toString("latin1"));
        parsed++;
        break;
      case 6:
        if (!isAscii(name.content)) fail("x509: SAN uniformResourceIdentifier is malformed");
        parsed++;
        break;
      case 7:
        if (name.content.length !== 4 && name.content.length !== 16)
          fail(`x509: cannot parse IP address of length ${name.content.length}`);
        ext.ipAddresses.push(ipString(name.content));
        parsed++;
        break;
    }
  }
  return parsed > 0;
}

function parseBasicConstraints(value: Buffer, ext: Extensions): void {
  const reader = enter(new DerReader(value), TAG.SEQUENCE, "x509: invalid basic constraints a");
  const isCA = optionalBoolean(reader, "x509: invalid basic constraints b");
  if (!reader.empty() && reader.peekTag() === TAG.INTEGER) {
    const pathLen = reader.readAny();
    if (pathLen === undefined || !isMinimalInteger(pathLen.content) || pathLen.content.length > 4)
      fail("x509: invalid basic constraints c");
  }
  ext.basicConstraintsValid = true;
  ext.isCA = isCA;
}

function parseKeyUsage(value: Buffer, ext: Extensions): void {
  const element = new DerReader(value).read(TAG.BIT_STRING);
  const bits = element && decodeBitString(element.content);
  if (bits === undefined) fail("x509: invalid key usage");
  let usage = 0;
  for (let i = 0; i < 9 && i < bits.bitLength; i++) {
    if ((bits.bytes[i >> 3]! >> (7 - (i & 7))) & 1) usage |= 1 << i;
  }
  ext.keyUsage = usage;
}

function parseExtKeyUsage(value: Buffer, ext: Extensions): void {
  const reader = enter(new DerReader(value), TAG.SEQUENCE, "x509: invalid extended key usages");
  while (!reader.empty()) {
    const oid = reader.readOid();
    if (oid === undefined) fail("x509: invalid extended key usages");
    ext.extKeyUsage.push(oid);
  }
}

/** What a certificate without extensions (or an empty list) says. */
function noExtensions(): Extensions {
  return {
    hasSanExtension: false,
    sanCritical: false,
    dnsNames: [],
    ipAddresses: [],
    basicConstraintsValid: false,
    isCA: false,
    keyUsage: 0,
    extKeyUsage: [],
    unhandledCritical: [],
  };
}

function parseExtensions(content: Buffer): Extensions {
  const ext = noExtensions();
  const reader = enter(new DerReader(content), TAG.SEQUENCE, "x509: malformed extensions");
  const seen = new Set<string>();
  while (!reader.empty()) {
    const parts = enter(reader, TAG.SEQUENCE, "x509: malformed extension");
    const id = parts.readOid();
    if (id === undefined) fail("x509: malformed extension OID field");
    const critical = optionalBoolean(parts, "x509: malformed extension critical field");
    const value = parts.read(TAG.OCTET_STRING);
    if (value === undefined) fail("x509: malformed extension value field");
    if (seen.has(id)) fail("x509: certificate contains duplicate extensions");
    seen.add(id);

    let handled = HANDLED_EXTENSIONS.has(id);
    if (id === "2.5.29.17") {
      ext.hasSanExtension = true;
      ext.sanCritical = critical;
      // An extension Go found no usable name in is left to the critical check.
      if (!parseSan(value.content, ext)) handled = false;
    } else if (id === "2.5.29.19") {
      parseBasicConstraints(value.content, ext);
    } else if (id === "2.5.29.15") {
      parseKeyUsage(value.content, ext);
    } else if (id === "2.5.29.37") {
      parseExtKeyUsage(value.content, ext);
    }
    if (critical && !handled) ext.unhandledCritical.push(id);
  }
  return ext;
}

/** Go's x509.ParseCertificate over one DER certificate; throws GoX509Error with Go's words. */
export function parseGoCertificate(der: Uint8Array): GoCertificate {
  const raw = Buffer.from(der.buffer, der.byteOffset, der.byteLength);
  const top = new DerReader(raw);
  const cert = top.read(TAG.SEQUENCE);
  if (cert === undefined || !top.empty()) fail("x509: malformed certificate");
  const body = new DerReader(cert.content);
  const tbs = enter(body, TAG.SEQUENCE, "x509: malformed tbs certificate");

  let version = 1;
  if (tbs.peekTag() === 0xa0) {
    const explicit = tbs.readAny();
    const inner = explicit && new DerReader(explicit.content).read(TAG.INTEGER);
    if (inner === undefined || !isMinimalInteger(inner.content)) fail("x509: malformed version");
    if ((inner.content[0]! & 0x80) !== 0) fail("x509: malformed version");
    version = inner.content.length === 1 ? inner.content[0]! + 1 : 99;
    if (version > 3) fail("x509: invalid version");
  }
  const serial = tbs.read(TAG.INTEGER);
  if (serial === undefined || !isMinimalInteger(serial.content)) fail("x509: malformed serial number");
  // Since Go 1.23 (today's kube-apiserver builds) a negative serial is refused.
  if ((serial.content[0]! & 0x80) !== 0) fail("x509: negative serial number");
  const innerAlgorithm = tbs.read(TAG.SEQUENCE);
  if (innerAlgorithm === undefined) fail("x509: malformed signature algorithm identifier");
  const outerAlgorithm = body.read(TAG.SEQUENCE);
  if (outerAlgorithm === undefined) fail("x509: malformed algorithm identifier");
  if (!outerAlgorithm.content.equals(innerAlgorithm.content))
    fail("x509: inner and outer signature algorithm identifiers don't match");

  const issuer = tbs.read(TAG.SEQUENCE);
  if (issuer === undefined) fail("x509: malformed issuer");
  parseName(issuer.content);
  const times = enter(tbs, TAG.SEQUENCE, "x509: malformed validity");
  const notBeforeElement = times.readAny();
  const notBefore = parseTime(notBeforeElement);
  const notAfterElement = times.readAny();
  const notAfter = parseTime(notAfterElement);
  const subject = tbs.read(TAG.SEQUENCE);
  if (subject === undefined) fail("x509: malformed subject");
  const subjectName = parseName(subject.content);
  if (tbs.read(TAG.SEQUENCE) === undefined) fail("x509: malformed spki");

  let extensions: Extensions | undefined;
  if (version > 1) {
    if (tbs.peekTag() === 0x81) tbs.readAny();
    if (tbs.peekTag() === 0x82) tbs.readAny();
    if (version === 3 && tbs.peekTag() === 0xa3) {
      const wrapped = tbs.readAny();
      if (wrapped === undefined) fail("x509: malformed extensions");
      extensions = parseExtensions(wrapped.content);
    }
  }
  const signature = body.read(TAG.BIT_STRING);
  if (signature === undefined || decodeBitString(signature.content) === undefined)
    fail("x509: malformed signature");

  return {
    raw,
    rawIssuer: issuer.encoded,
    rawSubject: subject.encoded,
    version,
    serial: serial.content,
    subjectCommonName: subjectName.commonName,
    subjectOrganization: subjectName.organization,
    subjectAttributes: subjectName.attributes,
    notBefore,
    notAfter,
    validityTags: [notBeforeElement!.tag, notAfterElement!.tag],
    ...(extensions ?? noExtensions()),
  };
}

/** The DER of every certificate in a PEM text, in order. */
export function pemCertificates(pem: string): Buffer[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((block) =>
    Buffer.from(block.replace(/-----(BEGIN|END) CERTIFICATE-----/g, "").replace(/\s+/g, ""), "base64"),
  );
}

/** Why Go would refuse the first certificate of `pem`, or undefined when it parses. */
export function goParseError(pem: string): string | undefined {
  const [der] = pemCertificates(pem);
  if (der === undefined) return "no PEM certificate";
  try {
    parseGoCertificate(der);
    return undefined;
  } catch (err) {
    if (err instanceof GoX509Error) return err.message;
    throw err;
  }
}

const YEAR_2050 = Date.UTC(2050, 0, 1);

/** What RFC 5280 asks that Go lets pass; empty for a certificate made as it should be. */
export function rfc5280Problems(cert: GoCertificate): string[] {
  const problems: string[] = [];
  const serial = cert.serial[0] === 0 ? cert.serial.subarray(1) : cert.serial;
  if (serial.every((byte) => byte === 0)) problems.push("the serial number is not positive");
  if (cert.serial.length > 20) problems.push(`the serial number is ${cert.serial.length} octets; at most 20`);
  cert.validityTags.forEach((tag, i) => {
    const when = i === 0 ? cert.notBefore : cert.notAfter;
    const want = when.getTime() < YEAR_2050 ? TAG.UTC_TIME : TAG.GENERALIZED_TIME;
    if (tag !== want)
      problems.push(
        `${i === 0 ? "notBefore" : "notAfter"} ${when.toISOString()} must be a ${want === TAG.UTC_TIME ? "UTCTime" : "GeneralizedTime"}`,
      );
  });
  if (cert.subjectAttributes === 0 && !(cert.hasSanExtension && cert.sanCritical))
    problems.push("the subject is empty and no critical subjectAltName names the certificate");
  if (cert.isCA && (cert.keyUsage & KEY_USAGE_CERT_SIGN) === 0)
    problems.push("a CA certificate without keyUsage keyCertSign");
  for (const name of cert.dnsNames) {
    if (isIP(name) !== 0) problems.push(`the IP address ${name} is a DNS SAN; it belongs in an IP SAN`);
  }
  return problems;
}
