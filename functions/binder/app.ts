// The binder function: POST / takes one forwarded PVC or PV event (CloudEvent
// or watch event), POST /resync runs the periodic pass, and GET /explain/...
// says why a claim is Pending. All decisions live in shared/binder.
import type { Request, Response } from "express";
import type { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import { type ParsedEvent, parseEventRequest } from "../../shared/events/index.ts";
import { BadRequestError } from "../../shared/http/errors.ts";
import { createFunctionApp, type FunctionApp } from "../../shared/http/function-app.ts";
import type { Logger } from "../../shared/log.ts";
import type { Registry } from "../../shared/metrics.ts";

export interface BinderAppOptions {
  controller: BinderController;
  logger?: Logger;
  metrics?: Registry;
}

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function createBinderApp(options: BinderAppOptions): FunctionApp {
  const { controller } = options;
  return createFunctionApp<ParsedEvent>({
    name: "binder",
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.metrics ? { metrics: options.metrics } : {}),
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
        return { ignored: `${e.ref.apiVersion}/${e.ref.kind} is not handled by the binder` };
      return { synced };
    },
    resync: () => controller.resync(),
    routes(router) {
      router.get(
        "/explain/namespaces/:namespace/persistentvolumeclaims/:name",
        async (req: Request<{ namespace: string; name: string }>, res: Response) => {
          const { namespace, name } = req.params;
          if (!dns1123Label.test(namespace) || namespace.length > 63) {
            throw new BadRequestError(`invalid namespace ${JSON.stringify(namespace)}`);
          }
          if (!dns1123Subdomain.test(name) || name.length > 253) {
            throw new BadRequestError(`invalid claim name ${JSON.stringify(name)}`);
          }
          const explanation = await controller.explain(namespace, name);
          if (!explanation) {
            res
              .status(404)
              .json({ error: `persistentvolumeclaims "${name}" not found in namespace "${namespace}"` });
            return;
          }
          res.json(explanation);
        },
      );
    },
  });
}
