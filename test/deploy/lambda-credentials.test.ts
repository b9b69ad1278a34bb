// The Lambda functions' credentials: read at cold start from SSM Parameter
// Store or Secrets Manager (functions/lambda-credentials.ts) over real HTTP
// from a server playing both APIs, signed with SigV4; and the packaging
// check that refuses to build without them (scripts/build-lambda.ts,
// scripts/lambda-credentials.cjs).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { after, before, beforeEach, describe, it } from "node:test";
import {
  LambdaCredentialsError,
  loadLambdaCredentials,
  signingKey,
  sigV4Authorization,
} from "../../functions/lambda-credentials.ts";
import { lambdaCredentialProblems } from "../../scripts/build-lambda.ts";
import { REPO } from "./code-rbac.ts";
import {
  ACCESS_KEY_ID,
  awsEnv,
  type FakeAws,
  SECRET_ACCESS_KEY,
  SESSION_TOKEN,
  startFakeAws,
} from "./fake-aws.ts";

const TOKEN_PARAMETER = "/kube-storage-functions/auth-token";
const KUBECONFIG_SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ksf-kubeconfig-AbCdEf";
const KUBECONFIG_YAML = "apiVersion: v1\nkind: Config\nclusters: []\n";

describe("SigV4", () => {
  it("derives the signing key of AWS's documented example", () => {
    assert.equal(
      signingKey("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam").toString("hex"),
      "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d",
    );
  });

  it("signs AWS's get-vanilla test request", () => {
    assert.equal(
      sigV4Authorization(
        {
          method: "GET",
          path: "/",
          query: "",
          headers: { host: "example.amazonaws.com", "x-amz-date": "20150830T123600Z" },
          body: "",
        },
        { accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET_ACCESS_KEY },
        { region: "us-east-1", service: "service", amzDate: "20150830T123600Z" },
      ),
      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    );
  });

  it("signs an SSM GetParameter as the AWS SDK's signer does (@smithy/signature-v4 gave this value)", () => {
    assert.equal(
      sigV4Authorization(
        {
          method: "POST",
          path: "/",
          query: "",
          headers: {
            host: "ssm.eu-west-1.amazonaws.com",
            "content-type": "application/x-amz-json-1.1",
            "x-amz-date": "20250101T000000Z",
            "x-amz-target": "AmazonSSM.GetParameter",
            "x-amz-security-token": "TOKEN",
          },
          body: JSON.stringify({ Name: "/a/b", WithDecryption: true }),
        },
        { accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET_ACCESS_KEY },
        { region: "eu-west-1", service: "ssm", amzDate: "20250101T000000Z" },
      ),
      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20250101/eu-west-1/ssm/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target, Signature=cccc4c8a87194e3fc7e869ac3daa400d794eb9114bc8dc449e2c482f7102020d",
    );
  });
});

describe("loadLambdaCredentials against a server playing SSM and Secrets Manager", () => {
  let aws: FakeAws;
  before(async () => {
    aws = await startFakeAws();
  });
  after(async () => {
    await aws.close();
  });
  beforeEach(() => {
    aws.parameters.clear();
    aws.secrets.clear();
    aws.denied.clear();
    aws.throttleNext = 0;
    aws.seen.length = 0;
    aws.parameters.set(TOKEN_PARAMETER, { Type: "SecureString", Value: "the-token" });
    aws.secrets.set(KUBECONFIG_SECRET, { SecretString: KUBECONFIG_YAML });
  });

  function lambdaEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    return {
      ...awsEnv(aws),
      AUTH_MODE: "token",
      AUTH_TOKEN_SSM_PARAMETER: TOKEN_PARAMETER,
      KUBECONFIG_SECRET_ARN: KUBECONFIG_SECRET,
      ...extra,
    };
  }

  /** The error loadLambdaCredentials throws, which must be a LambdaCredentialsError. */
  async function failure(env: NodeJS.ProcessEnv): Promise<LambdaCredentialsError> {
    try {
      await loadLambdaCredentials(env, { attempts: 2 });
    } catch (err) {
      assert.ok(err instanceof LambdaCredentialsError, String(err));
      return err;
    }
    assert.fail("loadLambdaCredentials succeeded");
  }

  it("reads the token from a SecureString (decrypted) and the kubeconfig from a secret, signed, with the session token", async () => {
    const env = lambdaEnv();
    const { loaded } = await loadLambdaCredentials(env);
    assert.deepEqual(loaded.sort(), ["AUTH_TOKEN", "KUBECONFIG_DATA"]);
    assert.equal(env.AUTH_TOKEN, "the-token");
    assert.equal(env.KUBECONFIG_DATA, KUBECONFIG_YAML);
    const byTarget = new Map(aws.seen.map((s) => [s.target, s]));
    assert.deepEqual(byTarget.get("AmazonSSM.GetParameter")?.body, {
      Name: TOKEN_PARAMETER,
      WithDecryption: true,
    });
    assert.equal(byTarget.get("AmazonSSM.GetParameter")?.service, "ssm");
    assert.deepEqual(byTarget.get("secretsmanager.GetSecretValue")?.body, { SecretId: KUBECONFIG_SECRET });
    for (const s of aws.seen) {
      assert.equal(s.region, "eu-west-1");
      assert.equal(s.securityToken, SESSION_TOKEN);
      assert.match(s.authorization, /SignedHeaders=[^,]*x-amz-security-token/);
    }
  });

  it("the other way round: the token from a secret (binary), the kubeconfig from a parameter ARN", async () => {
    const tokenSecret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ksf-token-XyZ123";
    const kubeconfigArn = "arn:aws:ssm:eu-central-1:123456789012:parameter/ksf/kubeconfig";
    aws.secrets.set(tokenSecret, { SecretBinary: Buffer.from("binary-token").toString("base64") });
    aws.parameters.set(kubeconfigArn, { Type: "SecureString", Value: "a3ViZWNvbmZpZw==" });
    const env = lambdaEnv({ AUTH_TOKEN_SECRET_ARN: tokenSecret, KUBECONFIG_SSM_PARAMETER: kubeconfigArn });
    delete env.AUTH_TOKEN_SSM_PARAMETER;
    delete env.KUBECONFIG_SECRET_ARN;
    await loadLambdaCredentials(env);
    assert.equal(env.AUTH_TOKEN, "binary-token");
    assert.equal(env.KUBECONFIG_DATA, "a3ViZWNvbmZpZw==");
    // An ARN's own region is the one signed for.
    assert.equal(aws.seen.find((s) => s.service === "ssm")?.region, "eu-central-1");
  });

  it("a store's value replaces one already in the environment", async () => {
    const env = lambdaEnv({ AUTH_TOKEN: "stale" });
    await loadLambdaCredentials(env);
    assert.equal(env.AUTH_TOKEN, "the-token");
  });

  it("retries throttling and succeeds", async () => {
    aws.throttleNext = 1;
    const env = lambdaEnv();
    await loadLambdaCredentials(env);
    assert.equal(env.AUTH_TOKEN, "the-token");
    assert.equal(aws.seen.length, 3, "one throttled call, then both");
  });

  const failures: {
    name: string;
    arrange?: () => void;
    env?: Record<string, string | undefined>;
    public: RegExp;
    detail: RegExp;
  }[] = [
    {
      name: "a missing parameter",
      arrange: () => aws.parameters.clear(),
      public: /^cannot read AUTH_TOKEN from SSM Parameter Store$/,
      detail: /parameter \/kube-storage-functions\/auth-token: ParameterNotFound/,
    },
    {
      name: "a role without the grant",
      arrange: () => aws.denied.add(KUBECONFIG_SECRET),
      public: /^cannot read KUBECONFIG_DATA from Secrets Manager$/,
      detail: /AccessDeniedException: not authorized to perform: secretsmanager:GetSecretValue/,
    },
    {
      name: "a plain String parameter",
      arrange: () => aws.parameters.set(TOKEN_PARAMETER, { Type: "String", Value: "clear" }),
      public: /AUTH_TOKEN: the SSM parameter is not a SecureString/,
      detail: /is a String/,
    },
    {
      name: "an empty secret",
      arrange: () => aws.secrets.set(KUBECONFIG_SECRET, { SecretString: " " }),
      public: /KUBECONFIG_DATA: the secret is empty/,
      detail: /ksf-kubeconfig/,
    },
    {
      name: "throttling that does not stop",
      arrange: () => {
        aws.throttleNext = 10;
      },
      public: /^cannot read /,
      detail: /ThrottlingException: Rate exceeded/,
    },
    {
      name: "both stores named for one credential",
      env: { AUTH_TOKEN_SECRET_ARN: KUBECONFIG_SECRET },
      public: /set AUTH_TOKEN_SSM_PARAMETER or AUTH_TOKEN_SECRET_ARN, not both/,
      detail: /not both/,
    },
    {
      name: "a secret named by something other than an ARN",
      env: { KUBECONFIG_SECRET_ARN: "ksf-kubeconfig" },
      public: /^KUBECONFIG_SECRET_ARN is not a Secrets Manager secret ARN$/,
      detail: /: ksf-kubeconfig$/,
    },
    {
      name: "a signature AWS does not accept (another secret key)",
      env: { AWS_SECRET_ACCESS_KEY: "not-the-key" },
      public: /^cannot read /,
      detail: /InvalidSignatureException/,
    },
    {
      name: "no AWS credentials",
      env: { AWS_ACCESS_KEY_ID: undefined },
      public: /no AWS credentials in the environment/,
      detail: /AWS_ACCESS_KEY_ID/,
    },
    {
      name: "no kubeconfig anywhere",
      env: { KUBECONFIG_SECRET_ARN: undefined },
      public: /^no kubeconfig: set KUBECONFIG_SSM_PARAMETER or KUBECONFIG_SECRET_ARN/,
      detail: /no kubeconfig/,
    },
    {
      name: "AUTH_MODE=token and no token anywhere",
      env: { AUTH_TOKEN_SSM_PARAMETER: undefined },
      public: /^AUTH_MODE=token and no token: set AUTH_TOKEN_SSM_PARAMETER or AUTH_TOKEN_SECRET_ARN/,
      detail: /no token/,
    },
    {
      name: "an endpoint nothing listens on",
      env: { AWS_ENDPOINT_URL_SSM: "http://127.0.0.1:1" },
      public: /^cannot read AUTH_TOKEN from SSM Parameter Store$/,
      detail: /ECONNREFUSED/,
    },
  ];
  for (const f of failures) {
    it(`fails closed on ${f.name}, naming it, and leaves the environment as it was`, async () => {
      f.arrange?.();
      const env = lambdaEnv();
      for (const [k, v] of Object.entries(f.env ?? {})) {
        if (v === undefined) delete env[k];
        else env[k] = v;
      }
      const before = { ...env };
      const err = await failure(env);
      assert.match(err.publicMessage, f.public);
      assert.match(err.message, f.detail);
      // What the public URL answers names no parameter, secret or AWS text.
      assert.doesNotMatch(err.publicMessage, /arn:|kube-storage-functions\/|Rate exceeded|ECONNREFUSED/);
      if (!/no (kubeconfig|token)/.test(f.name)) assert.deepEqual(env, before);
    });
  }

  it("without any store a plain AUTH_TOKEN and KUBECONFIG still do (local runs, the sandbox)", async () => {
    const env: NodeJS.ProcessEnv = { AUTH_MODE: "token", AUTH_TOKEN: "t", KUBECONFIG: "/some/file" };
    assert.deepEqual(await loadLambdaCredentials(env), { loaded: [] });
    assert.equal(aws.seen.length, 0);
  });
});

describe("packaging refuses without the credentials' stores", () => {
  const complete = {
    KSF_AUTH_TOKEN_SSM_PARAMETER: "/ksf/auth-token",
    KSF_KUBECONFIG_SECRET_ARN: KUBECONFIG_SECRET,
  };
  const iam = createRequire(import.meta.url)("../../scripts/lambda-credentials.cjs") as {
    statements: (env: NodeJS.ProcessEnv) => unknown[];
  };

  it("names both when neither is given, and one when one is missing", () => {
    const none = lambdaCredentialProblems({});
    assert.equal(none.length, 2);
    assert.match(none[0] ?? "", /KSF_AUTH_TOKEN_SSM_PARAMETER .* or KSF_AUTH_TOKEN_SECRET_ARN/);
    assert.match(none[1] ?? "", /KSF_KUBECONFIG_SSM_PARAMETER .* or KSF_KUBECONFIG_SECRET_ARN/);
    const one = lambdaCredentialProblems({ KSF_AUTH_TOKEN_SSM_PARAMETER: "/ksf/auth-token" });
    assert.deepEqual(one.length, 1);
    assert.match(one[0] ?? "", /kubeconfig/);
  });

  it("accepts one store per credential, and refuses both, bad names and a bad KMS key", () => {
    assert.deepEqual(lambdaCredentialProblems(complete), []);
    assert.match(
      lambdaCredentialProblems({ ...complete, KSF_AUTH_TOKEN_SECRET_ARN: KUBECONFIG_SECRET }).join(),
      /not both/,
    );
    assert.match(
      lambdaCredentialProblems({ ...complete, KSF_KUBECONFIG_SECRET_ARN: "just-a-name" }).join(),
      /not a Secrets Manager secret ARN/,
    );
    assert.match(
      lambdaCredentialProblems({ ...complete, KSF_AUTH_TOKEN_SSM_PARAMETER: "has space" }).join(),
      /not an SSM parameter name/,
    );
    assert.match(
      lambdaCredentialProblems({ ...complete, KSF_CREDENTIALS_KMS_KEY_ARN: "alias/x" }).join(),
      /not a KMS key ARN/,
    );
  });

  it("the role may read exactly the named parameter and secret", () => {
    assert.deepEqual(iam.statements({ ...complete, KSF_CREDENTIALS_KMS_KEY_ARN: "" }), [
      {
        Effect: "Allow",
        Action: ["ssm:GetParameter"],
        Resource: [
          {
            "Fn::Join": [
              "",
              [
                "arn:",
                { Ref: "AWS::Partition" },
                ":ssm:",
                { Ref: "AWS::Region" },
                ":",
                { Ref: "AWS::AccountId" },
                ":parameter/ksf/auth-token",
              ],
            ],
          },
        ],
      },
      { Effect: "Allow", Action: ["secretsmanager:GetSecretValue"], Resource: [KUBECONFIG_SECRET] },
    ]);
    const key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";
    const both = iam.statements({
      KSF_AUTH_TOKEN_SECRET_ARN: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:t-AbCdEf",
      KSF_KUBECONFIG_SSM_PARAMETER: "arn:aws:ssm:eu-west-1:123456789012:parameter/k",
      KSF_CREDENTIALS_KMS_KEY_ARN: key,
    });
    assert.deepEqual(both, [
      {
        Effect: "Allow",
        Action: ["ssm:GetParameter"],
        Resource: ["arn:aws:ssm:eu-west-1:123456789012:parameter/k"],
      },
      {
        Effect: "Allow",
        Action: ["secretsmanager:GetSecretValue"],
        Resource: ["arn:aws:secretsmanager:eu-west-1:123456789012:secret:t-AbCdEf"],
      },
      { Effect: "Allow", Action: ["kms:Decrypt"], Resource: [key] },
    ]);
    assert.throws(
      () => iam.statements({}),
      /refusing to package the Lambda functions without their credentials/,
    );
  });

  it("`npm run build:lambda` exits 2 with the reasons and builds nothing without them", async () => {
    const env = { PATH: process.env.PATH, HOME: process.env.HOME };
    const result = await new Promise<{ code: number | null; stderr: string; stdout: string }>(
      (resolve, reject) => {
        const child = spawn(
          process.execPath,
          [join(REPO, "scripts", "build-lambda.ts"), "--out", "/nonexistent"],
          {
            cwd: REPO,
            env,
            stdio: ["ignore", "pipe", "pipe"],
          },
        );
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (d: Buffer) => {
          stdout += d.toString();
        });
        child.stderr.on("data", (d: Buffer) => {
          stderr += d.toString();
        });
        child.on("error", reject);
        child.on("close", (code) => resolve({ code, stdout, stderr }));
      },
    );
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /refusing to build the Lambda functions without their credentials/);
    assert.match(result.stderr, /KSF_AUTH_TOKEN_SSM_PARAMETER/);
    assert.match(result.stderr, /KSF_KUBECONFIG_SECRET_ARN/);
    assert.equal(result.stdout, "", "nothing built");
  });
});
