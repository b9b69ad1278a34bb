// Turns a request body into text and text into checked JSON. Bodies arrive as
// a Buffer (express.raw), a string (express.text), an already parsed value
// (express.json), or nothing. Parsed values are serialized back to JSON text so
// that every body, however it arrived, goes through the same checks.

import { isRecord } from "../is-record.ts";
import { describeType } from "./describe.ts";
import { EnvelopeError } from "./errors.ts";
import { MAX_BODY_BYTES, MAX_JSON_DEPTH } from "./limits.ts";

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The body as text; undefined when there is none (or only whitespace). */
export function bodyText(body: unknown): string | undefined {
  let text: string | undefined;
  if (body === undefined || body === null) return undefined;
  if (body instanceof Uint8Array) {
    checkSize(body.byteLength);
    try {
      text = utf8.decode(body);
    } catch {
      throw new EnvelopeError("request body is not valid UTF-8");
    }
  } else if (typeof body === "string") {
    checkSize(Buffer.byteLength(body, "utf8"));
    text = body;
  } else {
    text = serializeParsed(body);
  }
  return text.trim() === "" ? undefined : text;
}

function checkSize(bytes: number): void {
  if (bytes > MAX_BODY_BYTES) {
    throw new EnvelopeError(`request body is ${bytes} bytes; the limit is ${MAX_BODY_BYTES}`);
  }
}

/** A body some middleware already parsed: back to JSON text, or a clear refusal. */
function serializeParsed(body: unknown): string {
  let text: unknown;
  try {
    text = JSON.stringify(body);
  } catch (err) {
    // Cycles, BigInts, throwing toJSON or getters: not something JSON could have produced.
    const reason = err instanceof Error ? err.message : String(err);
    throw new EnvelopeError(
      `request body is ${describeType(body)} that cannot be written as JSON: ${reason}`,
    );
  }
  if (typeof text !== "string") {
    throw new EnvelopeError(`request body is ${describeType(body)}, which has no JSON form`);
  }
  checkSize(Buffer.byteLength(text, "utf8"));
  return text;
}

/**
 * JSON.parse plus the checks the rest of the code relies on: no "__proto__"
 * keys (JSON.parse makes them harmless own properties, but any later merge
 * that copies keys by assignment, obj[key] = value, would replace a
 * prototype instead) and bounded nesting.
 * `what` names the text in messages, e.g. "request body".
 */
export function parseJson(text: string, what: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new EnvelopeError(`${what} is not valid JSON: ${shorten(reason)}`);
  }
  // The walk that names the offending path allocates a frame per container;
  // it runs only once the cheap walk has found something to refuse.
  if (typeof value === "object" && value !== null && !isPlainTree(value, 0)) checkJsonTree(value, what);
  return value;
}

/**
 * True when no container nests MAX_JSON_DEPTH deep and no object has a
 * "__proto__" key: exactly the trees checkJsonTree accepts. Recursion is
 * bounded by MAX_JSON_DEPTH, so the stack cannot overflow.
 */
function isPlainTree(value: object, depth: number): boolean {
  if (depth >= MAX_JSON_DEPTH) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const child: unknown = value[i];
      if (typeof child === "object" && child !== null && !isPlainTree(child, depth + 1)) return false;
    }
    return true;
  }
  const record = value as Record<string, unknown>;
  // JSON.parse makes plain objects with own keys only, so for-in sees just those.
  for (const key in record) {
    if (key === "__proto__") return false;
    const child = record[key];
    if (typeof child === "object" && child !== null && !isPlainTree(child, depth + 1)) return false;
  }
  return true;
}

function shorten(message: string): string {
  return message.length <= 200 ? message : `${message.slice(0, 200)}…`;
}

/** A container met while walking; its path is spelled out only for an error message. */
interface JsonFrame {
  value: object;
  depth: number;
  parent: JsonFrame | undefined;
  key: string | number;
}

function pathOf(frame: JsonFrame | undefined): string {
  const parts: string[] = [];
  for (let f = frame; f?.parent !== undefined; f = f.parent)
    parts.push(typeof f.key === "number" ? `[${f.key}]` : `.${shortKey(f.key)}`);
  return parts.reverse().join("").replace(/^\./, "");
}

/**
 * Walks the parsed tree without recursion, so depth cannot overflow the
 * stack. Only objects and arrays are visited (leaves cannot nest or hold
 * keys), so an event's few thousand leaves cost nothing but a type check.
 */
function checkJsonTree(root: unknown, what: string): void {
  if (typeof root !== "object" || root === null) return;
  const stack: JsonFrame[] = [{ value: root, depth: 0, parent: undefined, key: "" }];
  for (let frame = stack.pop(); frame !== undefined; frame = stack.pop()) {
    const { value, depth } = frame;
    if (depth >= MAX_JSON_DEPTH) {
      throw new EnvelopeError(`${what} nests deeper than ${MAX_JSON_DEPTH} levels`);
    }
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const child: unknown = value[i];
        if (typeof child === "object" && child !== null)
          stack.push({ value: child, depth: depth + 1, parent: frame, key: i });
      }
      continue;
    }
    if (!isRecord(value)) continue;
    for (const key of Object.keys(value)) {
      if (key === "__proto__") {
        const path = pathOf(frame);
        throw new EnvelopeError(
          `${what} has a "__proto__" key${path ? ` in ${path}` : ""}; that key is not allowed`,
        );
      }
      const child = value[key];
      if (typeof child === "object" && child !== null)
        stack.push({ value: child, depth: depth + 1, parent: frame, key });
    }
  }
}

function shortKey(key: string): string {
  return key.length <= 40 ? key : `${key.slice(0, 40)}…`;
}
