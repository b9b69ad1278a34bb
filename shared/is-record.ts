// The one test that parsed JSON is an object with fields (not null, not an
// array), before any of its fields are read.
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
