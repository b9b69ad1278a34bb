// Serves the driver's methods as the csi.v1 gRPC services. Without the
// CONTROLLER_SERVICE plugin capability the Controller service is not
// registered at all, so its calls fail UNIMPLEMENTED as on a node-only
// driver.
import {
  type handleUnaryCall,
  type Server,
  type ServerErrorResponse,
  status,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { type CsiDriver, type CsiMethodName, type CsiRequest, serviceMethods } from "./driver.ts";
import { CsiError } from "./errors.ts";
import { type CsiServiceName, csiService } from "./proto.ts";

export interface CsiServicesOptions {
  /** The node this server's Node service runs on; default the driver's own node. */
  node?: string;
  /** Serve the Controller service too (as the driver advertises); default true. */
  controller?: boolean;
}

/** One plugin's services; a node-only plugin (controller: false) serves Identity and Node. */
export function addCsiServices(server: Server, driver: CsiDriver, options: CsiServicesOptions = {}): void {
  const node = options.node ?? driver.config.nodeId;
  const controller = options.controller ?? true;
  for (const [service, methods] of Object.entries(serviceMethods) as [
    CsiServiceName,
    readonly CsiMethodName[],
  ][]) {
    if (
      service === "Controller" &&
      (!controller || !driver.config.pluginCapabilities.has("CONTROLLER_SERVICE"))
    )
      continue;
    const implementation: UntypedServiceImplementation = {};
    for (const method of methods) implementation[method] = unary(driver, method, node);
    server.addService(csiService(service), implementation);
  }
}

function unary(driver: CsiDriver, method: CsiMethodName, node: string): handleUnaryCall<unknown, unknown> {
  return (call, callback) => {
    driver.invoke(method, call.request as CsiRequest<typeof method>, node).then(
      (response) => callback(null, response),
      (err: unknown) => callback(toStatus(err)),
    );
  };
}

function toStatus(err: unknown): Partial<ServerErrorResponse> {
  if (err instanceof CsiError) return { code: err.grpcCode, details: err.message };
  // A bug or an I/O failure: INTERNAL, with the message so tests can see why.
  return { code: status.INTERNAL, details: err instanceof Error ? err.message : String(err) };
}
