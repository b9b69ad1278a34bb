// Types of csi-static.js (protobufjs-cli's static code, written by `npm run
// generate:csi`): namespaces and message classes, looked up by name in proto.ts.
import type { IConversionOptions, Reader, Writer } from "protobufjs";

/** One message class's static functions. */
export interface StaticMessageType {
  encode(message: object, writer?: Writer): Writer;
  decode(reader: Reader | Uint8Array, length?: number): object;
  fromObject(object: Record<string, unknown>): object;
  toObject(message: object, options?: IConversionOptions): Record<string, unknown>;
}

/** A package or message: nested packages and messages by name. */
export interface StaticNamespace {
  readonly [name: string]: unknown;
}

export declare const csi: StaticNamespace;
export declare const google: StaticNamespace;
