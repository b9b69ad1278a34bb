// A real HTTP server playing SSM Parameter Store's GetParameter and Secrets
// Manager's GetSecretValue (AWS JSON 1.1 protocol), for the Lambda
// credential loader. It checks each request's SigV4 Authorization against
// what was sent (headers, body, scope), so a request whose wire form differs
// from what was signed is refused as AWS would (InvalidSignatureException).

import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { sigV4Authorization } from "../../functions/lambda-credentials.ts";

export const ACCESS_KEY_ID = "AKIDEXAMPLE";
export const SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
export const SESSION_TOKEN = "session-token-example";

export interface FakeParameter {
  Type: "String" | "SecureString" | "StringList";
  Value: string;
}

export interface FakeSecret {
  SecretString?: string;
  SecretBinary?: string;
}

export interface SeenRequest {
  target: string;
  body: Record<string, unknown>;
  authorization: string;
  region: string;
  service: string;
  securityToken: string | undefined;
}

export interface FakeAws {
  url: string;
  parameters: Map<string, FakeParameter>;
  secrets: Map<string, FakeSecret>;
  /** Names or ARNs the role may not read (AccessDeniedException). */
  denied: Set<string>;
  /** Answer this many next requests with 503 ThrottlingException first. */
  throttleNext: number;
  seen: SeenRequest[];
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

export async function startFakeAws(): Promise<FakeAws> {
  const fake: Omit<FakeAws, "url" | "close"> = {
    parameters: new Map(),
    secrets: new Map(),
    denied: new Set(),
    throttleNext: 0,
    seen: [],
  };
  const server: Server = createServer(async (req, res) => {
    const text = await readBody(req);
    const fail = (status: number, type: string, message: string) => {
      res.writeHead(status, { "content-type": "application/x-amz-json-1.1", "x-amzn-errortype": type });
      res.end(JSON.stringify({ __type: type, message }));
    };
    const ok = (value: unknown) => {
      res.writeHead(200, { "content-type": "application/x-amz-json-1.1" });
      res.end(JSON.stringify(value));
    };
    const authorization = String(req.headers.authorization ?? "");
    const scope = /Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+),/.exec(
      authorization,
    );
    if (!scope || scope[1] !== ACCESS_KEY_ID)
      return fail(400, "UnrecognizedClientException", "bad credential");
    const [, , , region = "", service = "", signed = ""] = scope;
    const headers = Object.fromEntries(signed.split(";").map((h) => [h, String(req.headers[h] ?? "")]));
    const expected = sigV4Authorization(
      { method: req.method ?? "", path: req.url ?? "/", query: "", headers, body: text },
      { accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET_ACCESS_KEY },
      { region, service, amzDate: String(req.headers["x-amz-date"] ?? "") },
    );
    if (expected !== authorization || !signed.includes("x-amz-target") || !signed.includes("host"))
      return fail(400, "InvalidSignatureException", "The request signature we calculated does not match");
    const target = String(req.headers["x-amz-target"] ?? "");
    const body = JSON.parse(text) as Record<string, unknown>;
    const securityToken = req.headers["x-amz-security-token"];
    fake.seen.push({
      target,
      body,
      authorization,
      region,
      service,
      securityToken: typeof securityToken === "string" ? securityToken : undefined,
    });
    if (fake.throttleNext > 0) {
      fake.throttleNext--;
      return fail(400, "ThrottlingException", "Rate exceeded");
    }
    if (target === "AmazonSSM.GetParameter" && service === "ssm") {
      const name = String(body.Name);
      if (fake.denied.has(name))
        return fail(400, "AccessDeniedException", `not authorized to perform: ssm:GetParameter on ${name}`);
      const p = fake.parameters.get(name);
      if (!p) return fail(400, "ParameterNotFound", "");
      // Without decryption a SecureString comes back as ciphertext.
      const value = p.Type === "SecureString" && body.WithDecryption !== true ? "AQICAH-ciphertext" : p.Value;
      return ok({ Parameter: { Name: name, Type: p.Type, Value: value, Version: 1 } });
    }
    if (target === "secretsmanager.GetSecretValue" && service === "secretsmanager") {
      const id = String(body.SecretId);
      if (fake.denied.has(id))
        return fail(400, "AccessDeniedException", `not authorized to perform: secretsmanager:GetSecretValue`);
      const s = fake.secrets.get(id);
      if (!s)
        return fail(400, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.");
      return ok({ ARN: id, Name: id.split(":").pop(), VersionId: "v1", ...s });
    }
    return fail(400, "UnknownOperationException", target);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(fake, {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }) as FakeAws;
}

/** The environment Lambda gives a function, pointed at the fake. */
export function awsEnv(fake: FakeAws): Record<string, string> {
  return {
    AWS_REGION: "eu-west-1",
    AWS_ACCESS_KEY_ID: ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY: SECRET_ACCESS_KEY,
    AWS_SESSION_TOKEN: SESSION_TOKEN,
    AWS_ENDPOINT_URL_SSM: fake.url,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: fake.url,
  };
}
