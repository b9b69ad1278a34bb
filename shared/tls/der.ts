// A strict DER reader: tag, minimal length, content. Only what reading an
// X.509 certificate the way Go's crypto/x509 does needs; anything a DER
// encoder would not produce (indefinite or non-minimal lengths, high tag
// numbers, truncation) is refused, as Go's cryptobyte refuses it.

export const TAG = {
  BOOLEAN: 0x01,
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  OID: 0x06,
  UTF8_STRING: 0x0c,
  SEQUENCE: 0x30,
  SET: 0x31,
  NUMERIC_STRING: 0x12,
  PRINTABLE_STRING: 0x13,
  T61_STRING: 0x14,
  IA5_STRING: 0x16,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  BMP_STRING: 0x1e,
} as const;

/** One TLV: its tag byte, its content, and the whole encoding (tag and length included). */
export interface Element {
  tag: number;
  content: Buffer;
  encoded: Buffer;
}

export class DerReader {
  private readonly buf: Buffer;
  private pos = 0;

  constructor(buf: Buffer) {
    this.buf = buf;
  }

  empty(): boolean {
    return this.pos >= this.buf.length;
  }

  peekTag(): number | undefined {
    return this.empty() ? undefined : this.buf[this.pos];
  }

  /** The next element, or undefined when there is none or it is not valid DER. */
  readAny(): Element | undefined {
    const start = this.pos;
    const buf = this.buf;
    if (start + 2 > buf.length) return undefined;
    const tag = buf[start]!;
    if ((tag & 0x1f) === 0x1f) return undefined;
    const first = buf[start + 1]!;
    let length: number;
    let header = 2;
    if ((first & 0x80) === 0) {
      length = first;
    } else {
      const count = first & 0x7f;
      if (count === 0 || count > 4 || start + 2 + count > buf.length) return undefined;
      if (buf[start + 2] === 0) return undefined;
      length = 0;
      for (let i = 0; i < count; i++) length = length * 256 + buf[start + 2 + i]!;
      if (length < 0x80) return undefined;
      header += count;
    }
    const end = start + header + length;
    if (end > buf.length) return undefined;
    this.pos = end;
    return { tag, content: buf.subarray(start + header, end), encoded: buf.subarray(start, end) };
  }

  /** The next element if it has this tag; undefined (nothing consumed) otherwise. */
  read(tag: number): Element | undefined {
    if (this.peekTag() !== tag) return undefined;
    return this.readAny();
  }

  /** The next element's dotted OBJECT IDENTIFIER; undefined when it is not a well-formed one. */
  readOid(): string | undefined {
    const element = this.read(TAG.OID);
    return element && decodeOid(element.content);
  }
}

/** A DER INTEGER's content is minimal: no redundant leading 0x00 or 0xff. */
export function isMinimalInteger(content: Buffer): boolean {
  if (content.length === 0) return false;
  if (content.length === 1) return true;
  const [a, b] = [content[0]!, content[1]!];
  return !((a === 0 && (b & 0x80) === 0) || (a === 0xff && (b & 0x80) === 0x80));
}

/** Dotted form of an OBJECT IDENTIFIER's content; undefined when malformed. */
function decodeOid(content: Buffer): string | undefined {
  if (content.length === 0) return undefined;
  const arcs: number[] = [];
  let value = 0;
  let started = false;
  for (const byte of content) {
    if (!started && byte === 0x80) return undefined; // non-minimal arc
    started = true;
    value = value * 128 + (byte & 0x7f);
    if (value > Number.MAX_SAFE_INTEGER / 128) return undefined;
    if ((byte & 0x80) === 0) {
      arcs.push(value);
      value = 0;
      started = false;
    }
  }
  if (started) return undefined;
  const first = arcs[0]!;
  const head = first < 40 ? [0, first] : first < 80 ? [1, first - 40] : [2, first - 80];
  return [...head, ...arcs.slice(1)].join(".");
}

/** A BIT STRING's bits (unused padding checked zero); undefined when malformed. */
export function decodeBitString(content: Buffer): { bytes: Buffer; bitLength: number } | undefined {
  if (content.length === 0) return undefined;
  const unused = content[0]!;
  if (unused > 7 || (content.length === 1 && unused > 0)) return undefined;
  const bytes = content.subarray(1);
  if (bytes.length > 0 && (bytes[bytes.length - 1]! & ((1 << unused) - 1)) !== 0) return undefined;
  return { bytes, bitLength: bytes.length * 8 - unused };
}
