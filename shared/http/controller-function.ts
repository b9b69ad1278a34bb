// The HTTP function shape every controller shares: POST / takes forwarded
// resource events (CloudEvents or watch events), PingSource events and
// POST /resync run the periodic pass. A controller supplies handleEvent and
// resync; this module maps the envelope to them.
import { type ParsedEvent, parseEventRequest } from "../events/index.ts";
import type { Logger } from "../log.ts";
import type { Registry } from "../metrics.ts";
import { createFunctionApp, type FunctionApp, type RequestContext } from "./function-app.ts";
import type { FunctionRoutes } from "./route-table.ts";

/** One change to one object, as a controller sees it. */
export interface ControllerEvent {
  action: "add" | "update" | "delete";
  kind: string;
  apiVersion: string;
  name: string;
  namespace?: string;
  /** The object as the event carried it; absent in Reference mode. A hint: controllers read the truth. */
  object?: Record<string, unknown>;
}

export interface Controller {
  /** Returns one report per object synced; [] when the kind is not this controller's. */
  handleEvent(e: ControllerEvent): Promise<object[]>;
  resync(): Promise<object>;
}

/** What every controller's app factory takes: its controller, and where it logs and counts. */
export interface ControllerAppOptions<C extends Controller> {
  controller: C;
  logger?: Logger;
  metrics?: Registry;
}

interface ControllerFunctionOptions extends ControllerAppOptions<Controller> {
  name: string;
  routes?: (router: FunctionRoutes, ctx: () => RequestContext) => void;
  ready?: () => Promise<boolean>;
}

export function createControllerFunction(options: ControllerFunctionOptions): FunctionApp {
  const { controller, name } = options;
  return createFunctionApp<ParsedEvent>({
    name,
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.metrics ? { metrics: options.metrics } : {}),
    ...(options.routes ? { routes: options.routes } : {}),
    ...(options.ready ? { ready: options.ready } : {}),
    parseEvents: (headers, body) => parseEventRequest(headers, body),
    describeEvent: (e) =>
      e.kind === "resource"
        ? {
            ...(e.id ? { eventId: e.id } : {}),
            objectKey: `${e.ref.kind}/${e.ref.namespace ? `${e.ref.namespace}/` : ""}${e.ref.name}`,
            ...(e.resourceVersion ? { resourceVersion: e.resourceVersion } : {}),
          }
        : e.id
          ? { eventId: e.id }
          : {},
    orderKey: (e) =>
      e.kind === "resource" ? `${e.ref.kind}/${e.ref.namespace ?? ""}/${e.ref.name}` : undefined,
    async handleEvent(e) {
      if (e.kind === "ignored") return { ignored: e.reason };
      if (e.kind === "resync") return { resync: await controller.resync() };
      const synced = await controller.handleEvent({
        action: e.action,
        kind: e.ref.kind,
        apiVersion: e.ref.apiVersion,
        name: e.ref.name,
        ...(e.ref.namespace !== undefined ? { namespace: e.ref.namespace } : {}),
        ...(e.object ? { object: e.object } : {}),
      });
      if (synced.length === 0)
        return { ignored: `${e.ref.apiVersion}/${e.ref.kind} is not handled by ${name}` };
      return { synced };
    },
    resync: () => controller.resync(),
  });
}
