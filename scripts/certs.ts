// `npm run certs`: the admission webhook's CA and serving certificate.
//
// Writes ca.crt, ca.key, tls.crt and tls.key to the output directory. With a
// KUBECONFIG it also keeps the cluster in step: the kubernetes.io/tls Secret
// the function serves from (tls.crt, tls.key, plus ca.crt), and the caBundle
// of every webhook in our Mutating/ValidatingWebhookConfiguration.
//
// Idempotent, so it can run from a CronJob or before every deploy: a
// certificate that is valid for more than --renew-before-days (30) and covers
// the Service is left alone (the caBundle is still checked). The current
// certificate is the Secret's when there is a cluster, else the files'.
//
// Human-readable progress goes to stderr; stdout gets one JSON summary line.
//
//   npm run certs -- [--service NAME] [--namespace NS] [--out DIR] [--secret NAME]
//                    [--webhook-config NAME | --mutating NAME --validating NAME]
//                    [--extra-sans a,b] [--valid-days N] [--renew-before-days N] [--force]

import { X509Certificate } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { isNotFound } from "../shared/kube/api-errors.ts";
import { loadKubeConfig } from "../shared/kube/client.ts";
import { KubeJsonClient } from "../shared/kube/json-client.ts";
import { updateObject } from "../shared/kube/optimistic-update.ts";
import {
  mutatingWebhookConfigurations,
  type ResourceDescriptor,
  secrets,
  validatingWebhookConfigurations,
} from "../shared/kube/resources.ts";
import type { KubeObject } from "../shared/kube/types.ts";
import { bundleContains, rotatedBundle } from "../shared/tls/bundle.ts";
import { DEFAULT_VALID_DAYS, generateCertificates, subjectAltNames } from "../shared/tls/certificates.ts";
import { type ExistingCertificates, renewalReason } from "../shared/tls/check.ts";

const USAGE = `usage: npm run certs -- [options]
  --service NAME            Service of the admission function (CERT_SERVICE, default kube-storage-functions-admission)
  --namespace NS            its namespace (CERT_NAMESPACE, default kube-storage-functions)
  --out DIR                 where the PEM files go (CERT_DIR, default .certs)
  --secret NAME             the kubernetes.io/tls Secret (CERT_SECRET_NAME, default <service>-tls)
  --webhook-config NAME     both webhook configurations' name (WEBHOOK_CONFIG_NAME, default kube-storage-functions)
  --mutating NAME           MutatingWebhookConfiguration name (MUTATING_WEBHOOK_CONFIG_NAME)
  --validating NAME         ValidatingWebhookConfiguration name (VALIDATING_WEBHOOK_CONFIG_NAME)
  --extra-sans LIST         more SANs, comma-separated DNS names / IPs (CERT_EXTRA_SANS, default localhost,127.0.0.1)
  --valid-days N            lifetime of new certificates (CERT_VALID_DAYS, default 365)
  --renew-before-days N     renew when expiring within N days (CERT_RENEW_BEFORE_DAYS, default 30)
  --force                   make new certificates even if the current ones are fine
With KUBECONFIG set, the Secret is created/updated and caBundle patched into the webhook configurations.`;

class UsageError extends Error {
  override name = "UsageError";
}

interface Config {
  service: string;
  namespace: string;
  outDir: string;
  secretName: string;
  mutating: string;
  validating: string;
  extraSans: string[];
  validDays: number;
  renewBeforeDays: number;
  force: boolean;
}

function positiveInt(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw.trim() === "") return fallback;
  if (!/^\d+$/.test(raw.trim()) || Number(raw) < 1)
    throw new UsageError(`${name} must be a positive integer, got ${raw}`);
  return Number(raw);
}

function parseConfig(argv: string[], env: NodeJS.ProcessEnv): Config {
  let parsed: ReturnType<typeof parse>;
  function parse() {
    return parseArgs({
      args: argv,
      options: {
        service: { type: "string" },
        namespace: { type: "string" },
        out: { type: "string" },
        secret: { type: "string" },
        "webhook-config": { type: "string" },
        mutating: { type: "string" },
        validating: { type: "string" },
        "extra-sans": { type: "string" },
        "valid-days": { type: "string" },
        "renew-before-days": { type: "string" },
        force: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    });
  }
  try {
    parsed = parse();
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const v = parsed.values;
  if (v.help) {
    process.stderr.write(`${USAGE}\n`);
    process.exit(0);
  }
  const pick = (flag: string | undefined, name: string, fallback: string): string => {
    const value = flag ?? env[name];
    return value === undefined || value.trim() === "" ? fallback : value.trim();
  };
  const service = pick(v.service, "CERT_SERVICE", "kube-storage-functions-admission");
  const configName = pick(v["webhook-config"], "WEBHOOK_CONFIG_NAME", "kube-storage-functions");
  // An explicitly empty CERT_EXTRA_SANS means "no extras"; unset means the local defaults.
  const extra = v["extra-sans"] ?? env.CERT_EXTRA_SANS ?? "localhost,127.0.0.1";
  return {
    service,
    namespace: pick(v.namespace, "CERT_NAMESPACE", "kube-storage-functions"),
    outDir: resolve(pick(v.out, "CERT_DIR", ".certs")),
    secretName: pick(v.secret, "CERT_SECRET_NAME", `${service}-tls`),
    mutating: pick(v.mutating, "MUTATING_WEBHOOK_CONFIG_NAME", configName),
    validating: pick(v.validating, "VALIDATING_WEBHOOK_CONFIG_NAME", configName),
    extraSans: extra
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== ""),
    validDays: positiveInt("--valid-days", v["valid-days"] ?? env.CERT_VALID_DAYS, DEFAULT_VALID_DAYS),
    renewBeforeDays: positiveInt(
      "--renew-before-days",
      v["renew-before-days"] ?? env.CERT_RENEW_BEFORE_DAYS,
      30,
    ),
    force: v.force === true,
  };
}

const say = (line: string): void => void process.stderr.write(`certs: ${line}\n`);

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** Write-then-rename, so a server watching the directory never reads half a file. */
async function writeAtomically(path: string, content: string, mode: number): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, content, { mode });
  await rename(tmp, path);
}

interface Files extends ExistingCertificates {
  caKey?: string;
}

async function readFiles(dir: string): Promise<Files> {
  const [cert, key, caCert, caKey] = await Promise.all(
    ["tls.crt", "tls.key", "ca.crt", "ca.key"].map((f) => readOptional(join(dir, f))),
  );
  return {
    ...(cert ? { cert } : {}),
    ...(key ? { key } : {}),
    ...(caCert ? { caCert } : {}),
    ...(caKey ? { caKey } : {}),
  };
}

async function writeFiles(dir: string, files: Files): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // The CA first and the serving key before its certificate: a watcher that
  // reads between two renames sees a mismatched pair, rejects it and waits.
  if (files.caCert) await writeAtomically(join(dir, "ca.crt"), files.caCert, 0o644);
  if (files.caKey) await writeAtomically(join(dir, "ca.key"), files.caKey, 0o600);
  if (files.key) await writeAtomically(join(dir, "tls.key"), files.key, 0o600);
  if (files.cert) await writeAtomically(join(dir, "tls.crt"), files.cert, 0o644);
}

interface SecretObject extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}

function decodeSecret(secret: SecretObject): ExistingCertificates {
  const get = (key: string): string | undefined => {
    const value = secret.data?.[key];
    return typeof value === "string" && value !== ""
      ? Buffer.from(value, "base64").toString("utf8")
      : undefined;
  };
  const cert = get("tls.crt");
  const key = get("tls.key");
  const caCert = get("ca.crt");
  return { ...(cert ? { cert } : {}), ...(key ? { key } : {}), ...(caCert ? { caCert } : {}) };
}

function secretData(c: Required<ExistingCertificates>): Record<string, string> {
  const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");
  return { "tls.crt": b64(c.cert), "tls.key": b64(c.key), "ca.crt": b64(c.caCert) };
}

async function readSecret(kube: KubeJsonClient, config: Config): Promise<SecretObject | undefined> {
  try {
    return await kube.get<SecretObject>(secrets, config.secretName, config.namespace);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

async function applySecret(
  kube: KubeJsonClient,
  config: Config,
  certs: Required<ExistingCertificates>,
  existing: SecretObject | undefined,
): Promise<"created" | "updated" | "unchanged"> {
  const data = secretData(certs);
  if (existing === undefined) {
    await kube.create<SecretObject>(secrets, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: {
        name: config.secretName,
        namespace: config.namespace,
        labels: { "app.kubernetes.io/part-of": "kube-storage-functions" },
      },
      type: "kubernetes.io/tls",
      data,
    });
    return "created";
  }
  if (existing.type !== undefined && existing.type !== "kubernetes.io/tls") {
    // The type of a Secret is immutable; say what to do instead of failing obscurely.
    throw new Error(
      `secret ${config.namespace}/${config.secretName} has type ${existing.type}, not kubernetes.io/tls; delete it or choose another --secret`,
    );
  }
  const result = await updateObject<SecretObject>(
    kube,
    secrets,
    { name: config.secretName, namespace: config.namespace },
    (secret) => {
      secret.data = { ...(secret.data ?? {}), ...data };
      return secret;
    },
  );
  return result.written ? "updated" : "unchanged";
}

interface WebhookReport {
  kind: string;
  name: string;
  status: "patched" | "unchanged" | "not found";
  webhooks: number;
}

interface WebhookConfiguration extends KubeObject {
  webhooks?: { name?: string; clientConfig?: { caBundle?: string } & Record<string, unknown> }[];
}

function decodeBundle(b64: string | undefined): string {
  return b64 ? Buffer.from(b64, "base64").toString("utf8") : "";
}

/**
 * Sets caBundle on every webhook of one configuration. After a rotation the
 * bundle is the new CA plus the previous one; otherwise a webhook whose
 * bundle already trusts the current CA is left as it is.
 */
async function patchCaBundle(
  kube: KubeJsonClient,
  r: ResourceDescriptor,
  name: string,
  ca: string,
  previousCa: string | undefined,
): Promise<WebhookReport> {
  let count = 0;
  try {
    const result = await updateObject<WebhookConfiguration>(kube, r, { name }, (config) => {
      count = config.webhooks?.length ?? 0;
      for (const webhook of config.webhooks ?? []) {
        const current = decodeBundle(webhook.clientConfig?.caBundle);
        let next: string;
        if (previousCa !== undefined) next = rotatedBundle(ca, [previousCa]);
        else if (bundleContains(current, ca)) continue;
        else next = rotatedBundle(ca, []);
        webhook.clientConfig = {
          ...(webhook.clientConfig ?? {}),
          caBundle: Buffer.from(next).toString("base64"),
        };
      }
      return config;
    });
    return { kind: r.kind, name, status: result.written ? "patched" : "unchanged", webhooks: count };
  } catch (err) {
    if (isNotFound(err)) return { kind: r.kind, name, status: "not found", webhooks: 0 };
    throw err;
  }
}

function expiryOf(pem: string): string {
  return new X509Certificate(pem).validToDate.toISOString();
}

async function main(): Promise<void> {
  const config = parseConfig(process.argv.slice(2), process.env);
  const sans = subjectAltNames({
    service: config.service,
    namespace: config.namespace,
    extraDnsNames: config.extraSans,
  });
  const kube = process.env.KUBECONFIG?.trim() ? new KubeJsonClient(loadKubeConfig(process.env)) : undefined;
  try {
    const files = await readFiles(config.outDir);
    const secret = kube ? await readSecret(kube, config) : undefined;
    const fromSecret = secret ? decodeSecret(secret) : undefined;
    const current: ExistingCertificates = fromSecret ?? files;
    const where = fromSecret ? `secret ${config.namespace}/${config.secretName}` : config.outDir;

    const reason = config.force
      ? "--force"
      : renewalReason(current, {
          dnsNames: sans.dns,
          ips: sans.ips,
          renewBeforeDays: config.renewBeforeDays,
        });

    let certs: Required<ExistingCertificates>;
    let previousCa: string | undefined;
    if (reason === undefined && current.cert && current.key && current.caCert) {
      certs = { cert: current.cert, key: current.key, caCert: current.caCert };
      say(
        `the certificate in ${where} is valid until ${expiryOf(certs.cert)}; not renewing (renews within ${config.renewBeforeDays} days of expiry, or with --force)`,
      );
      // A Secret read but no local copy yet (e.g. another machine made it): give this one the files.
      if (!files.cert && fromSecret) await writeFiles(config.outDir, certs);
    } else {
      say(`making a new CA and serving certificate: ${reason}`);
      const made = generateCertificates({
        service: config.service,
        namespace: config.namespace,
        extraDnsNames: config.extraSans,
        validDays: config.validDays,
      });
      certs = { cert: made.cert, key: made.key, caCert: made.caCert };
      previousCa = current.caCert;
      await writeFiles(config.outDir, { ...certs, caKey: made.caKey });
      say(`wrote ca.crt, ca.key, tls.crt, tls.key to ${config.outDir} (valid until ${expiryOf(made.cert)})`);
      say(`SANs: ${[...sans.dns, ...sans.ips].join(", ")}`);
    }

    let secretStatus: string | undefined;
    const webhooks: WebhookReport[] = [];
    if (kube) {
      secretStatus = await applySecret(kube, config, certs, secret);
      say(`secret ${config.namespace}/${config.secretName}: ${secretStatus}`);
      for (const [r, name] of [
        [mutatingWebhookConfigurations, config.mutating],
        [validatingWebhookConfigurations, config.validating],
      ] as const) {
        const report = await patchCaBundle(kube, r, name, certs.caCert, previousCa);
        webhooks.push(report);
        say(
          report.status === "not found"
            ? `${r.kind} ${name} not found; apply it and run again to set its caBundle`
            : `${r.kind} ${name}: caBundle ${report.status} (${report.webhooks} webhooks)`,
        );
      }
    } else {
      say("KUBECONFIG not set: files only (no Secret, no caBundle patch)");
    }

    process.stdout.write(
      `${JSON.stringify({
        renewed: reason !== undefined,
        ...(reason !== undefined ? { reason } : {}),
        expires: expiryOf(certs.cert),
        dir: config.outDir,
        ...(secretStatus !== undefined
          ? { secret: { namespace: config.namespace, name: config.secretName, status: secretStatus } }
          : {}),
        webhooks,
      })}\n`,
    );
  } finally {
    await kube?.close();
  }
}

if (import.meta.main) {
  main().catch((err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`certs: ${err.message}\n${USAGE}\n`);
      process.exit(2);
    }
    process.stderr.write(`certs: failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
