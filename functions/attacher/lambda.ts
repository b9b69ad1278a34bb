// AWS Lambda entry of the attacher (serverless.yml): the app of main.ts's
// build(), built once per cold start and wrapped by ../lambda-adapter.ts; a
// schedule invocation becomes POST /resync. CSI_ENDPOINT must be a host:port
// the Lambda reaches (the driver's controller service over TCP, in the VPC).
import { lambdaHandler } from "../lambda-adapter.ts";
import { build } from "./main.ts";

// No watched copies: a frozen Lambda cannot keep a watch open.
export const handler = lambdaHandler("attacher", () =>
  build({ ...process.env, ATTACHER_CSINODE_CACHE: "false", ATTACHER_PV_CACHE: "false" }),
);
