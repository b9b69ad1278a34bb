// What every PATCH flavour shares: its error (with the HTTP code it answers)
// and safe access to plain JSON objects parsed from untrusted bodies.

export class PatchError extends Error {
  readonly code: number;

  constructor(code: number, message: string) {
    super(message);
    this.name = "PatchError";
    this.code = code;
  }
}

export type JsonObject = Record<string, unknown>;

export function own(obj: JsonObject, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

export function setOwn(obj: JsonObject, key: string, value: unknown): void {
  // JSON.parse yields "__proto__" as an ordinary key; plain assignment would instead
  // replace the object's prototype.
  if (key === "__proto__") {
    Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    obj[key] = value;
  }
}
