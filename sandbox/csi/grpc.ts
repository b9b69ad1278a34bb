// Serves the driver's methods as the csi.v1 gRPC services, with the same
// serializers and message shapes (shared/csi/types.ts) the functions' client
// uses. Without the CONTROLLER_SERVICE plugin capability the Controller
// service is not registered at all, so its calls fail UNIMPLEMENTED as on a
// node-only driver.
import {
  type handleUnaryCall,
  type Server,
  type ServerErrorResponse,
  status,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { type CsiServiceName, csiServiceDefinition } from "../../shared/csi/proto.ts";
import { fromWire, toWire } from "../../shared/csi/wire.ts";
import { type CsiDriver, type CsiMethodName, type CsiRequest, serviceMethods } from "./driver.ts";
import { CsiError } from "./errors.ts";

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
    const definition = csiServiceDefinition(service);
    const implementation: UntypedServiceImplementation = {};
    for (const method of methods) {
      const requestType = definition[method]?.requestTypeName;
      if (requestType === undefined) throw new Error(`csi.proto has no method ${service}/${method}`);
      implementation[method] = unary(driver, method, requestType, node);
    }
    server.addService(definition, implementation);
  }
}

function unary(
  driver: CsiDriver,
  method: CsiMethodName,
  requestType: string,
  node: string,
): handleUnaryCall<object, object> {
  return (call, callback) => {
    let request: CsiRequest<typeof method>;
    try {
      request = fromWire(requestType, call.request);
    } catch (err) {
      callback(toStatus(err));
      return;
    }
    driver.invoke(method, request, node).then(
      (response) => callback(null, toWire(response)),
      (err: unknown) => callback(toStatus(err)),
    );
  };
}

function toStatus(err: unknown): Partial<ServerErrorResponse> {
  if (err instanceof CsiError) return { code: err.grpcCode, details: err.message };
  // A bug or an I/O failure: INTERNAL, with the message so tests can see why.
  return { code: status.INTERNAL, details: err instanceof Error ? err.message : String(err) };
}
