// csi-tables.json (written by `npm run generate:csi` from the parsed
// csi.proto): each service's methods with their message types, and each
// message's decoding plan for wire.ts. Read as plain data, so no protobufjs
// reflection is built at run time.

import tables from "./csi-tables.json" with { type: "json" };

/** A method as csi.proto declares it; message types fully qualified ("csi.v1.ProbeRequest"). */
export interface CsiMethodTable {
  request: string;
  response: string;
  requestStream: boolean;
  responseStream: boolean;
}

/** How to decode one map value: a plain copy, an int64, or a message. */
export type CsiValuePlan = { kind: "copy" } | { kind: "int64" } | { kind: "message"; typeName: string };

/** A field wire.ts changes when decoding; fields it copies as they are have none. */
export type CsiFieldPlan =
  | { name: string; repeated: boolean; kind: "int64" }
  | { name: string; repeated: boolean; kind: "message"; typeName: string }
  | { name: string; kind: "map"; value: CsiValuePlan };

export interface CsiTables {
  /** Service name ("Identity") -> method name ("Probe") -> method. */
  methods: Record<string, Record<string, CsiMethodTable>>;
  /** Every message type by full name ("csi.v1.Volume") -> its fields' plans. */
  messages: Record<string, CsiFieldPlan[]>;
}

// The generator wrote it from these types; TypeScript sees only the JSON's literal shape.
export const CSI_TABLES: Readonly<CsiTables> = tables as CsiTables;
