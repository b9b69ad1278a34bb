// Reads a request body into one Buffer, whatever its Content-Type: the
// envelope parsers judge the type themselves and answer a clear 4xx. What
// the sender may do to the wire is bounded here:
//
//   - a Content-Length over the limit        -> 413 before a byte is read
//   - more bytes than the limit (decoded)    -> 413 as soon as they arrive
//   - Content-Encoding gzip / deflate / br   -> decoded (the limit counts decoded bytes)
//   - any other Content-Encoding             -> 415
//   - a body that does not decode            -> 400
//   - the client going away mid-body         -> 400 (nobody is left to read it)
//
// A 413 or 415 leaves the rest of the body unread, so the answer closes the
// connection instead of draining what could be endless.
//
// Why not body-parser (express.raw): it loads raw-body, iconv-lite and qs
// for this, a few milliseconds of every cold start, and we need none of
// their charsets and forms.

import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable, Transform } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import { BadRequestError } from "./errors.ts";

/** How each accepted Content-Encoding is decoded; identity needs nothing. */
const DECODERS: Readonly<Record<string, (() => Transform) | null>> = {
  identity: null,
  gzip: createGunzip,
  "x-gzip": createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

function contentEncodingOf(req: IncomingMessage): string {
  return (req.headers["content-encoding"] ?? "identity").trim().toLowerCase() || "identity";
}

/** The request as decoded bytes, or a 415 for an encoding we do not take. */
function decodedStream(req: IncomingMessage, encoding: string): Readable {
  const decoder = Object.hasOwn(DECODERS, encoding) ? DECODERS[encoding] : undefined;
  if (decoder === undefined)
    throw new BadRequestError(`unsupported content encoding ${JSON.stringify(encoding.slice(0, 60))}`, 415);
  if (decoder === null) return req;
  const stream = decoder();
  req.pipe(stream);
  return stream;
}

/**
 * The whole body, at most `limit` bytes after decoding. Rejects with a
 * BadRequestError (status 400, 413 or 415); `res` is told to close the
 * connection when the body is left unread.
 */
export function readRequestBody(req: IncomingMessage, res: ServerResponse, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  const refuse = (message: string, status: number): BadRequestError => {
    if (!res.headersSent) res.setHeader("connection", "close");
    return new BadRequestError(message, status);
  };
  if (Number.isFinite(declared) && declared > limit)
    return Promise.reject(refuse("request entity too large", 413));
  let stream: Readable;
  try {
    stream = decodedStream(req, contentEncodingOf(req));
  } catch (err) {
    if (!res.headersSent) res.setHeader("connection", "close");
    return Promise.reject(err);
  }
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const finish = (err: BadRequestError | undefined): void => {
      if (settled) return;
      settled = true;
      stream.off("data", onData);
      if (err === undefined) {
        resolve(chunks.length === 1 && chunks[0] !== undefined ? chunks[0] : Buffer.concat(chunks, received));
        return;
      }
      // Stop reading: the rest of the body is not ours to wait for.
      if (stream !== req) req.unpipe();
      req.pause();
      reject(err);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > limit) finish(refuse("request entity too large", 413));
      else chunks.push(chunk);
    };
    stream.on("data", onData);
    stream.once("end", () => finish(undefined));
    stream.once("error", () =>
      finish(
        stream === req
          ? new BadRequestError("request aborted")
          : new BadRequestError("request body does not decode as its content encoding"),
      ),
    );
    // The client gone before the end: 'close' without 'end' (Node also errors with "aborted").
    req.once("close", () => {
      if (!req.complete) finish(new BadRequestError("request aborted"));
    });
  });
}
