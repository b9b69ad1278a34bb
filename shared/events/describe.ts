// Helpers that put untrusted values into error messages without echoing
// megabytes back or printing "[object Object]".

const MAX_QUOTED = 80;

/** A short JSON-quoted rendering of a string, cut after 80 characters. */
export function quote(value: string): string {
  if (value.length <= MAX_QUOTED) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, MAX_QUOTED))}… (${value.length} characters)`;
}

/** "a string", "a number", "null", "an array", "an object", … for messages. */
export function describeType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "undefined":
      return "nothing";
    case "object":
      return "an object";
    case "string":
      return value === "" ? "an empty string" : "a string";
    case "number":
      return "a number";
    case "boolean":
      return "a boolean";
    case "bigint":
      return "a bigint";
    case "symbol":
      return "a symbol";
    default:
      return "a function";
  }
}
