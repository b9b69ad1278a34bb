// AWS Lambda entry of the resizer: the app of main.ts's build(), built once
// per cold start and wrapped by ../lambda-adapter.ts; a schedule invocation
// becomes POST /resync. CSI_ENDPOINT must be a host:port the Lambda reaches.
import { lambdaHandler } from "../lambda-adapter.ts";
import { build } from "./main.ts";

export const handler = lambdaHandler("resizer", build);
