// The deploy-time half of the Lambda credentials (the run-time half is
// functions/lambda-credentials.ts): where the bearer token and the kubeconfig
// are kept, given to `osls` as KSF_* variables, checked before anything is
// packaged, and the IAM statements that let the functions' role read exactly
// those. serverless.yml loads `iamStatements` through osls's `${file(...)}`
// source, which requires CommonJS; scripts/build-lambda.ts runs `problems`.
"use strict";

/** Each credential: what it is, and the two variables that may name where it is kept (one of them). */
const CREDENTIALS = [
  {
    what: "the controllers' bearer token (AUTH_TOKEN)",
    ssm: "KSF_AUTH_TOKEN_SSM_PARAMETER",
    secret: "KSF_AUTH_TOKEN_SECRET_ARN",
  },
  {
    what: "the kubeconfig",
    ssm: "KSF_KUBECONFIG_SSM_PARAMETER",
    secret: "KSF_KUBECONFIG_SECRET_ARN",
  },
];

/** Optional: the customer managed KMS key the SecureStrings or secrets are encrypted with. */
const KMS_KEY = "KSF_CREDENTIALS_KMS_KEY_ARN";

// The same shapes functions/lambda-credentials.ts accepts at run time.
const SSM_NAME = /^\/?[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/;
const SSM_ARN = /^arn:aws[a-z-]*:ssm:[a-z0-9-]+:\d{12}:parameter\/[A-Za-z0-9_./-]+$/;
const SECRET_ARN = /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$/;
const KMS_KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/;

function setting(env, name) {
  const value = typeof env[name] === "string" ? env[name].trim() : "";
  return value === "" ? undefined : value;
}

/** What is wrong with the KSF_* settings, one sentence each; empty when packaging may go ahead. */
function problems(env) {
  const out = [];
  for (const c of CREDENTIALS) {
    const parameter = setting(env, c.ssm);
    const secret = setting(env, c.secret);
    if (parameter === undefined && secret === undefined)
      out.push(
        `${c.what}: set ${c.ssm} (an SSM SecureString parameter) or ${c.secret} (a Secrets Manager secret)`,
      );
    else if (parameter !== undefined && secret !== undefined)
      out.push(`${c.what}: set ${c.ssm} or ${c.secret}, not both`);
    else if (parameter !== undefined && !SSM_NAME.test(parameter) && !SSM_ARN.test(parameter))
      out.push(`${c.ssm} is not an SSM parameter name or ARN: ${parameter}`);
    else if (secret !== undefined && !SECRET_ARN.test(secret))
      out.push(
        `${c.secret} is not a Secrets Manager secret ARN (arn:aws:secretsmanager:…:secret:…): ${secret}`,
      );
  }
  const key = setting(env, KMS_KEY);
  if (key !== undefined && !KMS_KEY_ARN.test(key)) out.push(`${KMS_KEY} is not a KMS key ARN: ${key}`);
  return out;
}

/** The ARN of an SSM parameter given by name or ARN, in the stack's partition, region and account. */
function parameterArn(parameter) {
  if (parameter.startsWith("arn:")) return parameter;
  const path = parameter.startsWith("/") ? parameter : `/${parameter}`;
  return {
    "Fn::Join": [
      "",
      [
        "arn:",
        { Ref: "AWS::Partition" },
        ":ssm:",
        { Ref: "AWS::Region" },
        ":",
        { Ref: "AWS::AccountId" },
        `:parameter${path}`,
      ],
    ],
  };
}

/** The role's statements: read exactly the configured parameters and secrets (and decrypt with their key). */
function statements(env) {
  const wrong = problems(env);
  if (wrong.length > 0)
    throw new Error(
      `refusing to package the Lambda functions without their credentials:\n  ${wrong.join("\n  ")}`,
    );
  const parameters = [];
  const secrets = [];
  for (const c of CREDENTIALS) {
    const parameter = setting(env, c.ssm);
    if (parameter !== undefined) parameters.push(parameterArn(parameter));
    else secrets.push(setting(env, c.secret));
  }
  const out = [];
  if (parameters.length > 0)
    out.push({ Effect: "Allow", Action: ["ssm:GetParameter"], Resource: parameters });
  if (secrets.length > 0)
    out.push({ Effect: "Allow", Action: ["secretsmanager:GetSecretValue"], Resource: [...new Set(secrets)] });
  const key = setting(env, KMS_KEY);
  if (key !== undefined) out.push({ Effect: "Allow", Action: ["kms:Decrypt"], Resource: [key] });
  return out;
}

module.exports = {
  CREDENTIALS,
  KMS_KEY,
  problems,
  statements,
  /** What serverless.yml's `${file(./scripts/lambda-credentials.cjs):iamStatements}` resolves to. */
  iamStatements: () => statements(process.env),
};
