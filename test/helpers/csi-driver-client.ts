// A raw grpc-js client for the csi.v1 services over the real unix socket,
// built by @grpc/proto-loader straight from csi.proto with the proto's own
// snake_case names, so driver tests exercise the wire protocol and not the
// serializers the driver and our CSI client share.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import {
  type Client,
  credentials,
  loadPackageDefinition,
  type ServiceClientConstructor,
  type ServiceError,
  status,
} from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { CSI_CONVERSION_OPTIONS, type CsiServiceName } from "../../shared/csi/proto.ts";

const csiProtoPath = fileURLToPath(new URL("../../shared/csi/csi.proto", import.meta.url));
let services: Record<CsiServiceName, ServiceClientConstructor> | undefined;

function csiClientConstructor(name: CsiServiceName): ServiceClientConstructor {
  if (!services) {
    const definition = loadSync(csiProtoPath, { keepCase: true, ...CSI_CONVERSION_OPTIONS });
    const pkg = loadPackageDefinition(definition) as unknown as {
      csi: { v1: Record<CsiServiceName, ServiceClientConstructor> };
    };
    services = pkg.csi.v1;
  }
  return services[name];
}

type Unary = (
  request: object,
  options: { deadline: Date },
  callback: (err: ServiceError | null, response: unknown) => void,
) => void;

export interface RawCsiClient {
  /** One unary call; resolves with the decoded response (int64 as decimal strings). */
  call<T = Record<string, unknown>>(
    service: CsiServiceName,
    method: string,
    request?: object,
    deadlineMs?: number,
  ): Promise<T>;
  close(): void;
}

export function rawCsiClient(endpoint: string): RawCsiClient {
  const clients = new Map<CsiServiceName, Client>();
  const clientFor = (service: CsiServiceName): Client => {
    let c = clients.get(service);
    if (!c) {
      const Ctor = csiClientConstructor(service);
      c = new Ctor(endpoint, credentials.createInsecure());
      clients.set(service, c);
    }
    return c;
  };
  return {
    call: (service, method, request = {}, deadlineMs = 10_000) =>
      new Promise((resolve, reject) => {
        const client = clientFor(service) as unknown as Record<string, Unary>;
        const fn = client[method];
        if (!fn) throw new Error(`csi.v1.${service} has no method ${method}`);
        fn.call(client, request, { deadline: new Date(Date.now() + deadlineMs) }, (err, response) =>
          err ? reject(err) : resolve(response as never),
        );
      }),
    close: () => {
      for (const c of clients.values()) c.close();
    },
  };
}

/** Asserts that a call fails with the named gRPC status; returns the error for more checks. */
export async function rejectsWith(
  promise: Promise<unknown>,
  code: keyof typeof status,
  message?: RegExp,
): Promise<ServiceError> {
  try {
    await promise;
  } catch (err) {
    const e = err as ServiceError;
    assert.equal(status[e.code], code, `expected ${code}, got ${status[e.code]}: ${e.details}`);
    if (message) assert.match(e.details, message);
    return e;
  }
  assert.fail(`expected the call to fail with ${code}, it succeeded`);
}

export const mountCap = (mode = "SINGLE_NODE_WRITER"): object => ({
  mount: { fs_type: "ext4" },
  access_mode: { mode },
});

export const blockCap = (mode = "SINGLE_NODE_WRITER"): object => ({ block: {}, access_mode: { mode } });
