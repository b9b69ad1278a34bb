// AWS Lambda entry of the binder (serverless.yml): the app of main.ts's
// build(), built once per cold start and wrapped by ../lambda-adapter.ts for
// function URL events; a schedule invocation becomes POST /resync.
import { lambdaHandler } from "../lambda-adapter.ts";
import { build } from "./main.ts";

// No watched copies: a frozen Lambda cannot keep a watch open.
export const handler = lambdaHandler("binder", () =>
  build({
    ...process.env,
    BINDER_VOLUME_CACHE: "false",
    BINDER_CLAIM_CACHE: "false",
    STORAGE_CLASS_CACHE: "false",
  }),
);
