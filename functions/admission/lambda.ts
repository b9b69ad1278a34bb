// AWS Lambda entry of the admission webhooks (serverless.yml): the app of
// main.ts's build(), built once per cold start and wrapped by
// ../lambda-adapter.ts. The function URL is HTTPS with a public certificate,
// so a webhook configuration can name it in clientConfig.url without a caBundle.
import { lambdaHandler } from "../lambda-adapter.ts";
import { build } from "./main.ts";

// No watched StorageClass copy: a frozen Lambda cannot keep a watch open.
export const handler = lambdaHandler("admission", () =>
  build({ ...process.env, STORAGE_CLASS_CACHE: "false" }),
);
