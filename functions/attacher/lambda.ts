// AWS Lambda entry of the attacher (serverless.yml): the app of main.ts's
// build(), built once per cold start and wrapped by ../lambda-adapter.ts; a
// schedule invocation becomes POST /resync. CSI_ENDPOINT must be a host:port
// the Lambda reaches (the driver's controller service over TCP, in the VPC).
import { lambdaHandler } from "../lambda-adapter.ts";
import { build } from "./main.ts";

export const handler = lambdaHandler("attacher", build);
