// readRequestBody over a real HTTP server: what a sender can do to the wire
// (encodings, sizes, going away) and the status each gets.
import assert from "node:assert/strict";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { BadRequestError } from "../../shared/http/errors.ts";
import { readRequestBody } from "../../shared/http/read-body.ts";

const LIMIT = 1024;

interface Answer {
  status: number;
  body: string;
  connection: string | undefined;
}

/** Echoes the body it read, or `<status> <message>` for the error. */
function echoServer(): Server {
  return createServer((req, res) => {
    readRequestBody(req, res, LIMIT).then(
      (body) => res.end(body),
      (err: unknown) => {
        const status = err instanceof BadRequestError ? err.status : 500;
        res.statusCode = status;
        res.end(`${status} ${err instanceof Error ? err.message : String(err)}`);
      },
    );
  });
}

describe("readRequestBody", () => {
  let server: Server;
  let port: number;
  before(async () => {
    server = echoServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => server.close());

  function send(headers: Record<string, string>, chunks: readonly Buffer[]): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = request({ host: "127.0.0.1", port, method: "POST", path: "/", headers }, (res) => {
        let body = "";
        res.on("data", (d: Buffer) => {
          body += d.toString();
        });
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, body, connection: res.headers.connection }),
        );
      });
      // A server that stops reading may close before every chunk is written.
      req.on("error", (err: NodeJS.ErrnoException) => (err.code === "EPIPE" ? undefined : reject(err)));
      for (const chunk of chunks) req.write(chunk);
      req.end();
    });
  }

  const text = Buffer.from('{"hello":"world"}');

  test("a plain body comes back as sent, whatever its content type", async () => {
    for (const type of ["application/json", "text/plain", "%%garbage"]) {
      const answer = await send({ "content-type": type }, [text]);
      assert.deepEqual([answer.status, answer.body], [200, text.toString()], type);
    }
  });

  test("an empty body is an empty Buffer", async () => {
    const answer = await send({ "content-length": "0" }, []);
    assert.deepEqual([answer.status, answer.body], [200, ""]);
  });

  test("gzip, x-gzip, deflate and br are decoded; identity and its spellings pass as they are", async () => {
    const cases: [string, Buffer][] = [
      ["gzip", gzipSync(text)],
      ["x-gzip", gzipSync(text)],
      ["deflate", deflateSync(text)],
      ["br", brotliCompressSync(text)],
      ["identity", text],
      [" GZIP ", gzipSync(text)],
    ];
    for (const [encoding, body] of cases) {
      const answer = await send({ "content-encoding": encoding }, [body]);
      assert.deepEqual([answer.status, answer.body], [200, text.toString()], encoding);
    }
  });

  test("another encoding is a 415 naming it, and the connection is closed", async () => {
    const answer = await send({ "content-encoding": "zstd" }, [text]);
    assert.equal(answer.status, 415);
    assert.match(answer.body, /unsupported content encoding "zstd"/);
    assert.equal(answer.connection, "close");
  });

  test("a Content-Length over the limit is a 413 before the body is read", async () => {
    const answer = await send({ "content-length": String(LIMIT + 1) }, [Buffer.alloc(LIMIT + 1, 97)]);
    assert.deepEqual([answer.status, answer.connection], [413, "close"]);
  });

  test("a body exactly at the limit is read; one byte more streamed without a length is a 413", async () => {
    const atLimit = await send({}, [Buffer.alloc(LIMIT, 97)]);
    assert.deepEqual([atLimit.status, atLimit.body.length], [200, LIMIT]);
    const chunked = await send({ "transfer-encoding": "chunked" }, [
      Buffer.alloc(LIMIT, 97),
      Buffer.from("b"),
    ]);
    assert.deepEqual([chunked.status, chunked.connection], [413, "close"]);
  });

  test("the limit counts decoded bytes: a small gzip of a large body is a 413", async () => {
    const bomb = gzipSync(Buffer.alloc(64 * LIMIT, 0));
    assert.ok(bomb.length < LIMIT);
    const answer = await send({ "content-encoding": "gzip" }, [bomb]);
    assert.equal(answer.status, 413);
  });

  test("a body that does not decode as its encoding is a 400", async () => {
    const answer = await send({ "content-encoding": "gzip" }, [Buffer.from("not gzip at all")]);
    assert.equal(answer.status, 400);
    assert.match(answer.body, /does not decode/);
  });

  test("a client gone mid-body is answered by nobody and crashes nothing", async () => {
    const settled = new Promise<unknown>((resolve) => {
      const probe = createServer((req, res) => {
        readRequestBody(req, res, LIMIT).then(resolve, resolve);
      });
      probe.listen(0, "127.0.0.1", () => {
        const { port: probePort } = probe.address() as AddressInfo;
        const req = request({
          host: "127.0.0.1",
          port: probePort,
          method: "POST",
          headers: { "content-length": "100" },
        });
        req.on("error", () => undefined);
        req.write("partial");
        setTimeout(() => req.destroy(), 50);
      });
      after(() => probe.close());
    });
    const outcome = await settled;
    assert.ok(outcome instanceof BadRequestError);
    assert.equal(outcome.message, "request aborted");
    // The echo server still answers.
    assert.equal((await send({}, [text])).status, 200);
  });
});
