// The Lambda deployment's own credentials, read at cold start from AWS SSM
// Parameter Store (a SecureString) or Secrets Manager: the bearer token the
// controllers require (AUTH_TOKEN) and the kubeconfig (KUBECONFIG_DATA). The
// deployment names where they are (AUTH_TOKEN_SSM_PARAMETER or
// AUTH_TOKEN_SECRET_ARN, KUBECONFIG_SSM_PARAMETER or KUBECONFIG_SECRET_ARN),
// never the values, so they stay out of templates and the function's
// configuration.
//
// Why no AWS SDK: two JSON calls signed with SigV4 are about a hundred lines
// on node:crypto and node:https, while the v3 clients would add their
// middleware stacks to every bundle's cold start (and two dependencies); the
// Parameters and Secrets extension would need a region- and version-pinned
// layer ARN. The credentials are the ones Lambda puts in the environment of
// the function's role (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN). AWS_ENDPOINT_URL_SSM / AWS_ENDPOINT_URL_SECRETS_MANAGER
// (the SDKs' names) point them elsewhere, e.g. a VPC endpoint or a test server.

import { createHash, createHmac } from "node:crypto";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";

/**
 * What failed while reading the credentials; the adapter answers 503 until a
 * cold start succeeds. `publicMessage` names settings and stores only (it goes
 * into answers to anyone who calls the public URL); `message` adds the
 * parameter or secret and AWS's error, for the log.
 */
export class LambdaCredentialsError extends Error {
  override name = "LambdaCredentialsError";
  readonly publicMessage: string;
  constructor(publicMessage: string, detail?: string) {
    super(detail ? `${publicMessage}: ${detail}` : publicMessage);
    this.publicMessage = publicMessage;
  }
}

/** Each credential: the variable the app reads, and the two variables that may name where it is kept. */
export const LAMBDA_CREDENTIALS = [
  { target: "AUTH_TOKEN", ssm: "AUTH_TOKEN_SSM_PARAMETER", secret: "AUTH_TOKEN_SECRET_ARN" },
  { target: "KUBECONFIG_DATA", ssm: "KUBECONFIG_SSM_PARAMETER", secret: "KUBECONFIG_SECRET_ARN" },
] as const;

export type CredentialSource =
  | { store: "ssm"; parameter: string; region?: string }
  | { store: "secretsmanager"; secretArn: string; region: string };

type Env = NodeJS.ProcessEnv;

// Parameter names (with an optional leading "/" hierarchy), or a parameter's ARN.
const SSM_NAME = /^\/?[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/;
const SSM_ARN = /^arn:aws[a-z-]*:ssm:([a-z0-9-]+):\d{12}:parameter\/[A-Za-z0-9_./-]+$/;
const SECRET_ARN = /^arn:aws[a-z-]*:secretsmanager:([a-z0-9-]+):\d{12}:secret:[A-Za-z0-9/_+=.@-]+$/;

function setting(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

/** Where one credential is kept, from its two variables: undefined when neither is set. */
function sourceOf(env: Env, c: (typeof LAMBDA_CREDENTIALS)[number]): CredentialSource | undefined {
  const parameter = setting(env, c.ssm);
  const secretArn = setting(env, c.secret);
  if (parameter !== undefined && secretArn !== undefined)
    throw new LambdaCredentialsError(`set ${c.ssm} or ${c.secret}, not both`);
  if (parameter !== undefined) {
    const arn = SSM_ARN.exec(parameter);
    if (!arn && !SSM_NAME.test(parameter))
      throw new LambdaCredentialsError(`${c.ssm} is not an SSM parameter name or ARN`, parameter);
    return { store: "ssm", parameter, ...(arn?.[1] ? { region: arn[1] } : {}) };
  }
  if (secretArn !== undefined) {
    const arn = SECRET_ARN.exec(secretArn);
    if (!arn?.[1])
      throw new LambdaCredentialsError(`${c.secret} is not a Secrets Manager secret ARN`, secretArn);
    return { store: "secretsmanager", secretArn, region: arn[1] };
  }
  return undefined;
}

/** The configured sources by the variable each fills; throws LambdaCredentialsError on a bad setting. */
export function credentialSourcesFromEnv(env: Env): Map<string, CredentialSource> {
  const out = new Map<string, CredentialSource>();
  for (const c of LAMBDA_CREDENTIALS) {
    const source = sourceOf(env, c);
    if (source) out.set(c.target, source);
  }
  return out;
}

interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

function awsCredentialsFromEnv(env: Env): AwsCredentials {
  const accessKeyId = setting(env, "AWS_ACCESS_KEY_ID");
  const secretAccessKey = setting(env, "AWS_SECRET_ACCESS_KEY");
  if (!accessKeyId || !secretAccessKey)
    throw new LambdaCredentialsError(
      "no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; Lambda sets them from the function's role)",
    );
  const sessionToken = setting(env, "AWS_SESSION_TOKEN");
  return { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) };
}

const sha256 = (data: string) => createHash("sha256").update(data, "utf8").digest("hex");
const hmac = (key: Buffer | string, data: string) => createHmac("sha256", key).update(data, "utf8").digest();

/** The SigV4 signing key of a day, region and service. */
export function signingKey(secretAccessKey: string, day: string, region: string, service: string): Buffer {
  return hmac(hmac(hmac(hmac(`AWS4${secretAccessKey}`, day), region), service), "aws4_request");
}

export interface SignableRequest {
  method: string;
  /** Path as sent (already URI-encoded), "/" for the JSON APIs. */
  path: string;
  /** Query string as sent, without "?"; "" for none. */
  query: string;
  /** Header names lower-case; every one given is signed. Must include host. */
  headers: Record<string, string>;
  body: string;
}

/**
 * The Authorization header value of a request under SigV4
 * (AWS4-HMAC-SHA256). `amzDate` is the x-amz-date value, YYYYMMDD'T'HHMMSS'Z';
 * the request's headers must carry it too.
 */
export function sigV4Authorization(
  req: SignableRequest,
  credentials: Pick<AwsCredentials, "accessKeyId" | "secretAccessKey">,
  scope: { region: string; service: string; amzDate: string },
): string {
  const names = Object.keys(req.headers)
    .map((h) => h.toLowerCase())
    .sort();
  const lowered = new Map(Object.entries(req.headers).map(([k, v]) => [k.toLowerCase(), v]));
  const canonicalHeaders = names
    .map((h) => `${h}:${(lowered.get(h) ?? "").trim().replace(/\s+/g, " ")}\n`)
    .join("");
  const signedHeaders = names.join(";");
  const canonicalQuery = req.query
    .split("&")
    .filter((p) => p !== "")
    .sort()
    .join("&");
  const canonicalRequest = [
    req.method,
    req.path,
    canonicalQuery,
    canonicalHeaders,
    signedHeaders,
    sha256(req.body),
  ].join("\n");
  const day = scope.amzDate.slice(0, 8);
  const credentialScope = `${day}/${scope.region}/${scope.service}/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", scope.amzDate, credentialScope, sha256(canonicalRequest)].join("\n");
  const signature = createHmac(
    "sha256",
    signingKey(credentials.secretAccessKey, day, scope.region, scope.service),
  )
    .update(toSign, "utf8")
    .digest("hex");
  return `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${credentialScope}, SignedHeaders=${signedHeaders}, Signature=${signature}`;
}

/** 20150830T123600Z */
export function amzDate(now: Date): string {
  return now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
}

interface Service {
  /** SigV4 service name and endpoint prefix. */
  signingName: string;
  /** x-amz-target prefix of the JSON protocol. */
  targetPrefix: string;
  /** The SDKs' service-specific endpoint variable. */
  endpointVariable: string;
}

const SSM: Service = {
  signingName: "ssm",
  targetPrefix: "AmazonSSM",
  endpointVariable: "AWS_ENDPOINT_URL_SSM",
};
const SECRETS_MANAGER: Service = {
  signingName: "secretsmanager",
  targetPrefix: "secretsmanager",
  endpointVariable: "AWS_ENDPOINT_URL_SECRETS_MANAGER",
};

function endpointOf(service: Service, region: string, env: Env): URL {
  const configured = setting(env, service.endpointVariable) ?? setting(env, "AWS_ENDPOINT_URL");
  if (configured !== undefined) {
    try {
      return new URL(configured);
    } catch {
      throw new LambdaCredentialsError(`${service.endpointVariable} is not a URL`, configured);
    }
  }
  const suffix = region.startsWith("cn-") ? "amazonaws.com.cn" : "amazonaws.com";
  return new URL(`https://${service.signingName}.${region}.${suffix}/`);
}

/** The error name of an AWS JSON-protocol answer ("ParameterNotFound"), from the header or the body. */
function awsErrorName(header: string | undefined, body: Record<string, unknown>): string | undefined {
  const raw = header ?? (typeof body.__type === "string" ? body.__type : undefined);
  return raw?.split(":")[0]?.split("#").pop();
}

// Per attempt: three fit in the admission function's 10 s Lambda timeout.
const TIMEOUT_MS = 3_000;
const MAX_BODY = 1 << 20;

/** One POST of the AWS JSON protocol: status and parsed body. */
function post(
  url: URL,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; errorType?: string; body: Record<string, unknown> }> {
  const send = url.protocol === "http:" ? httpRequest : httpsRequest;
  return new Promise((resolve, reject) => {
    const req = send(
      url,
      { method: "POST", headers: { ...headers, "content-length": String(Buffer.byteLength(body)) } },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_BODY) req.destroy(new Error(`answer larger than ${MAX_BODY} bytes`));
          else chunks.push(chunk);
        });
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed: unknown = {};
          try {
            parsed = text === "" ? {} : JSON.parse(text);
          } catch {
            parsed = { message: text.slice(0, 200) };
          }
          const errorType = res.headers["x-amzn-errortype"];
          resolve({
            status: res.statusCode ?? 0,
            ...(typeof errorType === "string" ? { errorType } : {}),
            body: typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : {},
          });
        });
        res.on("error", reject);
      },
    );
    req.setTimeout(TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${TIMEOUT_MS} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

export interface LoadOptions {
  /** The clock of the signature (tests). */
  now?: () => Date;
  /** Attempts per call for throttling, 5xx and network errors; default 3. */
  attempts?: number;
}

/** One signed call of `action` with a JSON body; a clear LambdaCredentialsError on any failure. */
async function call(
  service: Service,
  action: string,
  payload: Record<string, unknown>,
  region: string,
  env: Env,
  what: { public: string; detail: string },
  options: LoadOptions,
): Promise<Record<string, unknown>> {
  const credentials = awsCredentialsFromEnv(env);
  const url = endpointOf(service, region, env);
  const body = JSON.stringify(payload);
  const attempts = Math.max(1, options.attempts ?? 3);
  let last = "";
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const date = amzDate((options.now ?? (() => new Date()))());
    const headers: Record<string, string> = {
      host: url.host,
      "content-type": "application/x-amz-json-1.1",
      "x-amz-date": date,
      "x-amz-target": `${service.targetPrefix}.${action}`,
      ...(credentials.sessionToken ? { "x-amz-security-token": credentials.sessionToken } : {}),
    };
    const path = url.pathname || "/";
    const authorization = sigV4Authorization(
      { method: "POST", path, query: "", headers, body },
      credentials,
      {
        region,
        service: service.signingName,
        amzDate: date,
      },
    );
    let retry: boolean;
    try {
      const answer = await post(url, { ...headers, authorization }, body);
      if (answer.status >= 200 && answer.status < 300) return answer.body;
      const name = awsErrorName(answer.errorType, answer.body) ?? `HTTP ${answer.status}`;
      const message = answer.body.message ?? answer.body.Message;
      last = `${name}${typeof message === "string" && message ? `: ${message}` : ""}`;
      retry = answer.status >= 500 || answer.status === 429 || /Throttl/i.test(name);
    } catch (err) {
      last = (err as Error).message;
      retry = true;
    }
    if (!retry) break;
    if (attempt < attempts) await new Promise((r) => setTimeout(r, 100 * 4 ** (attempt - 1)));
  }
  throw new LambdaCredentialsError(`cannot read ${what.public}`, `${what.detail}: ${last}`);
}

/** The value a source holds: a SecureString parameter's, or a secret's string (or its binary as UTF-8). */
export async function readCredential(
  target: string,
  source: CredentialSource,
  env: Env = process.env,
  options: LoadOptions = {},
): Promise<string> {
  if (source.store === "ssm") {
    const region = source.region ?? setting(env, "AWS_REGION") ?? setting(env, "AWS_DEFAULT_REGION");
    const what = { public: `${target} from SSM Parameter Store`, detail: `parameter ${source.parameter}` };
    if (!region) throw new LambdaCredentialsError(`cannot read ${what.public}`, "no AWS_REGION");
    const answer = await call(
      SSM,
      "GetParameter",
      { Name: source.parameter, WithDecryption: true },
      region,
      env,
      what,
      options,
    );
    const parameter = answer.Parameter as Record<string, unknown> | undefined;
    // A plain String parameter is stored unencrypted and shown to anyone who may describe parameters: refuse it.
    if (parameter?.Type !== "SecureString")
      throw new LambdaCredentialsError(
        `${target}: the SSM parameter is not a SecureString`,
        `${what.detail} is ${typeof parameter?.Type === "string" ? `a ${parameter.Type}` : "not a parameter"}`,
      );
    if (typeof parameter.Value !== "string" || parameter.Value.trim() === "")
      throw new LambdaCredentialsError(`${target}: the SSM parameter is empty`, what.detail);
    return parameter.Value;
  }
  const what = { public: `${target} from Secrets Manager`, detail: `secret ${source.secretArn}` };
  const answer = await call(
    SECRETS_MANAGER,
    "GetSecretValue",
    { SecretId: source.secretArn },
    source.region,
    env,
    what,
    options,
  );
  const value =
    typeof answer.SecretString === "string"
      ? answer.SecretString
      : typeof answer.SecretBinary === "string"
        ? Buffer.from(answer.SecretBinary, "base64").toString("utf8")
        : undefined;
  if (value === undefined || value.trim() === "")
    throw new LambdaCredentialsError(`${target}: the secret is empty`, what.detail);
  return value;
}

/**
 * Reads every configured credential into `env` (AUTH_TOKEN, KUBECONFIG_DATA),
 * replacing a value already there, then checks that the function has what
 * it cannot run without: a kubeconfig from some source, and the token when
 * AUTH_MODE=token. Throws LambdaCredentialsError naming what is missing.
 */
export async function loadLambdaCredentials(
  env: Env = process.env,
  options: LoadOptions & { needsToken?: boolean } = {},
): Promise<{ loaded: string[] }> {
  const sources = credentialSourcesFromEnv(env);
  const values = await Promise.all(
    [...sources].map(
      async ([target, source]) => [target, await readCredential(target, source, env, options)] as const,
    ),
  );
  // Set only once all are read: a failed cold start leaves the environment as it was.
  for (const [target, value] of values) env[target] = value;
  if (!setting(env, "KUBECONFIG") && !setting(env, "KUBECONFIG_DATA"))
    throw new LambdaCredentialsError(
      "no kubeconfig: set KUBECONFIG_SSM_PARAMETER or KUBECONFIG_SECRET_ARN (or KUBECONFIG / KUBECONFIG_DATA)",
    );
  const tokenMode = (setting(env, "AUTH_MODE") ?? "none").toLowerCase() === "token";
  if ((options.needsToken ?? tokenMode) && !setting(env, "AUTH_TOKEN") && !setting(env, "AUTH_TOKEN_FILE"))
    throw new LambdaCredentialsError(
      "AUTH_MODE=token and no token: set AUTH_TOKEN_SSM_PARAMETER or AUTH_TOKEN_SECRET_ARN (or AUTH_TOKEN)",
    );
  return { loaded: values.map(([target]) => target) };
}
