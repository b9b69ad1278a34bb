// Go's fmt verbs, for the few places where upstream formats values into
// user-visible error texts (%q of a string or []string, %v of a map or slice)
// and we want the same text on the claim's Events.

/** strconv.Quote / %q of a string: double-quoted, Go escapes, printable Unicode kept. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0;
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\r") out += "\\r";
    else if (c === 0x07) out += "\\a";
    else if (c === 0x08) out += "\\b";
    else if (c === 0x0c) out += "\\f";
    else if (c === 0x0b) out += "\\v";
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}

/** %q of a []string: `["a" "b"]`. */
export function goQuoteList(items: readonly string[]): string {
  return `[${items.map(goQuote).join(" ")}]`;
}

/** %v of a []string: `[a b]`. */
export function goList(items: readonly string[]): string {
  return `[${items.join(" ")}]`;
}

/** %v of a map[string]string: `map[a:1 b:2]`, keys sorted as fmt sorts them. */
export function goMap(map: Readonly<Record<string, string>> | undefined): string {
  const keys = Object.keys(map ?? {}).sort(compareStrings);
  return `map[${keys.map((k) => `${k}:${map?.[k] ?? ""}`).join(" ")}]`;
}

/** Byte-wise string order (Go's <), which for UTF-16 differs from JS's default only above the BMP. */
export function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const ab = Buffer.from(a, "utf8");
  const bb = Buffer.from(b, "utf8");
  return Buffer.compare(ab, bb);
}
