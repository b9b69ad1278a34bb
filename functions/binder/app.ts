// The binder function: POST / takes one forwarded PVC or PV event (CloudEvent
// or watch event), POST /resync runs the periodic pass, and GET /explain/...
// says why a claim is Pending. All decisions live in shared/binder.
import type { Request, Response } from "express";
import type { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import {
  type ControllerAppOptions,
  createControllerFunction,
} from "../../shared/http/controller-function.ts";
import { BadRequestError } from "../../shared/http/errors.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function createBinderApp(options: ControllerAppOptions<BinderController>): FunctionApp {
  const { controller } = options;
  return createControllerFunction({
    ...options,
    name: "binder",
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
