// AWS Lambda entry of the attach/detach function (serverless.yml): the app of
// main.ts's build(), built once per cold start and wrapped by
// ../lambda-adapter.ts for function URL events; a schedule invocation becomes
// POST /resync.
import { lambdaHandler } from "../lambda-adapter.ts";
import { build } from "./main.ts";

export const handler = lambdaHandler("attach-detach", build);
