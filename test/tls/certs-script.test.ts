// `npm run certs` against the sandbox API server, as an operator would run it
// with a KUBECONFIG: the Secret, the caBundle of seeded webhook
// configurations, idempotence, and renewal.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createFunctionApp } from "../../shared/http/function-app.ts";
import { serveFunction } from "../../shared/http/serve.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  mutatingWebhookConfigurations,
  secrets,
  validatingWebhookConfigurations,
} from "../../shared/kube/resources.ts";
import type { KubeObject } from "../../shared/kube/types.ts";
import { serviceDnsNames, splitPemBundle } from "../../shared/tls/certificates.ts";
import { goParseError } from "../../shared/tls/go-x509.ts";
import { loadServingTls } from "../../shared/tls/serving.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { echoSpec } from "../http/echo-function.ts";
import {
  fingerprintOf,
  httpsFetch,
  printableStringCertificates,
  runCerts,
  summaryOf,
  waitFor,
} from "./helpers.ts";

const NAMESPACE = "kube-storage-functions";
const SERVICE = "kube-storage-functions-admission";

interface SecretObject extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}
interface WebhookConfiguration extends KubeObject {
  webhooks: { name: string; clientConfig: { caBundle?: string; service?: object } }[];
}

function webhookConfig(kind: "Mutating" | "Validating", names: string[]): object {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: `${kind}WebhookConfiguration`,
    metadata: { name: "kube-storage-functions" },
    webhooks: names.map((name) => ({
      name,
      clientConfig: { service: { namespace: NAMESPACE, name: SERVICE, path: `/${name}` } },
      rules: [
        {
          operations: ["CREATE"],
          apiGroups: [""],
          apiVersions: ["v1"],
          resources: ["persistentvolumeclaims"],
        },
      ],
      sideEffects: "None",
      admissionReviewVersions: ["v1"],
    })),
  };
}

const decode = (b64: string | undefined) => Buffer.from(b64 ?? "", "base64").toString("utf8");

let sandbox: TestSandbox;
let kube: KubeJsonClient;
let dir: string;

before(async () => {
  sandbox = await startTestSandbox();
  kube = new KubeJsonClient(sandbox.kubeConfig);
  dir = await mkdtemp(join(tmpdir(), "ksf-certs-"));
  await sandbox.admin.seed([
    { apiVersion: "v1", kind: "Namespace", metadata: { name: NAMESPACE } },
    webhookConfig("Mutating", ["pvc-mutate.storage.k8s.io", "pv-mutate.storage.k8s.io"]),
    webhookConfig("Validating", ["pvc-validate.storage.k8s.io"]),
  ]);
});

after(async () => {
  await kube.close();
  await sandbox.close();
  await rm(dir, { recursive: true, force: true });
});

async function bundles(): Promise<string[]> {
  const mutating = await kube.get<WebhookConfiguration>(
    mutatingWebhookConfigurations,
    "kube-storage-functions",
  );
  const validating = await kube.get<WebhookConfiguration>(
    validatingWebhookConfigurations,
    "kube-storage-functions",
  );
  return [...mutating.webhooks, ...validating.webhooks].map((w) => decode(w.clientConfig.caBundle));
}

describe("npm run certs with a KUBECONFIG", () => {
  test("creates the kubernetes.io/tls Secret and patches caBundle into every webhook", async () => {
    const run = await runCerts(["--out", dir], { KUBECONFIG: sandbox.kubeconfigPath });
    assert.equal(run.code, 0, run.stderr);
    const summary = summaryOf(run);
    assert.equal(summary.renewed, true);
    assert.equal(summary.reason, "no certificate yet");
    assert.deepEqual(summary.secret, { namespace: NAMESPACE, name: `${SERVICE}-tls`, status: "created" });
    assert.deepEqual(summary.webhooks, [
      {
        kind: "MutatingWebhookConfiguration",
        name: "kube-storage-functions",
        status: "patched",
        webhooks: 2,
      },
      {
        kind: "ValidatingWebhookConfiguration",
        name: "kube-storage-functions",
        status: "patched",
        webhooks: 1,
      },
    ]);

    const files = {
      ca: await readFile(join(dir, "ca.crt"), "utf8"),
      cert: await readFile(join(dir, "tls.crt"), "utf8"),
      key: await readFile(join(dir, "tls.key"), "utf8"),
    };
    assert.equal((await stat(join(dir, "tls.key"))).mode & 0o777, 0o600);
    assert.equal((await stat(join(dir, "ca.key"))).mode & 0o777, 0o600);

    const secret = await kube.get<SecretObject>(secrets, `${SERVICE}-tls`, NAMESPACE);
    assert.equal(secret.type, "kubernetes.io/tls");
    assert.deepEqual(Object.keys(secret.data ?? {}).sort(), ["ca.crt", "tls.crt", "tls.key"]);
    assert.equal(decode(secret.data?.["tls.crt"]), files.cert);
    assert.equal(decode(secret.data?.["tls.key"]), files.key);
    assert.equal(decode(secret.data?.["ca.crt"]), files.ca);

    const all = await bundles();
    assert.equal(all.length, 3);
    for (const bundle of all) {
      assert.equal(splitPemBundle(bundle).length, 1);
      assert.equal(fingerprintOf(bundle), fingerprintOf(files.ca));
    }
  });

  test("a second run leaves a fresh certificate, the Secret and the configurations alone", async () => {
    const before = {
      secret: (await kube.get<SecretObject>(secrets, `${SERVICE}-tls`, NAMESPACE)).metadata.resourceVersion,
      mutating: (await kube.get(mutatingWebhookConfigurations, "kube-storage-functions")).metadata
        .resourceVersion,
      cert: await readFile(join(dir, "tls.crt"), "utf8"),
    };
    const run = await runCerts(["--out", dir], { KUBECONFIG: sandbox.kubeconfigPath });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /is valid until .*; not renewing \(renews within 30 days of expiry/);
    const summary = summaryOf(run);
    assert.equal(summary.renewed, false);
    assert.deepEqual(summary.secret, { namespace: NAMESPACE, name: `${SERVICE}-tls`, status: "unchanged" });
    assert.deepEqual(
      (summary.webhooks as { status: string }[]).map((w) => w.status),
      ["unchanged", "unchanged"],
    );
    assert.equal(
      (await kube.get(secrets, `${SERVICE}-tls`, NAMESPACE)).metadata.resourceVersion,
      before.secret,
    );
    assert.equal(
      (await kube.get(mutatingWebhookConfigurations, "kube-storage-functions")).metadata.resourceVersion,
      before.mutating,
    );
    assert.equal(await readFile(join(dir, "tls.crt"), "utf8"), before.cert);
  });

  test("a function serving from the Secret picks up a renewal; the caBundle trusts old and new CA meanwhile", async () => {
    const source = { secret: { name: `${SERVICE}-tls`, namespace: NAMESPACE }, kube };
    const initial = await loadServingTls(source);
    const oldCa = await readFile(join(dir, "ca.crt"), "utf8");
    const served = await serveFunction(createFunctionApp(echoSpec({ auth: null })), {
      host: "127.0.0.1",
      handleSignals: false,
      stdout: { write: () => true },
      tls: source,
      tlsReloadIntervalMs: 200,
    });
    try {
      assert.equal(
        (await httpsFetch(`${served.url}/healthz`, { ca: oldCa })).fingerprint,
        fingerprintOf(initial.cert),
      );

      // Expiring within the window (here: a window longer than the lifetime) means renewal.
      const run = await runCerts(["--out", dir, "--renew-before-days", "400"], {
        KUBECONFIG: sandbox.kubeconfigPath,
      });
      assert.equal(run.code, 0, run.stderr);
      const summary = summaryOf(run);
      assert.equal(summary.renewed, true);
      assert.match(String(summary.reason), /^it expires .*, within 400 days$/);
      assert.equal((summary.secret as { status: string }).status, "updated");

      const newCa = await readFile(join(dir, "ca.crt"), "utf8");
      const newCert = await readFile(join(dir, "tls.crt"), "utf8");
      for (const bundle of await bundles()) {
        assert.deepEqual(
          splitPemBundle(bundle).map(fingerprintOf),
          [fingerprintOf(newCa), fingerprintOf(oldCa)],
          "new CA first, the previous one kept for the switch-over",
        );
      }
      await waitFor("the served certificate to follow the Secret", async () => {
        const answer = await httpsFetch(`${served.url}/healthz`, { ca: [oldCa, newCa] });
        return answer.fingerprint === fingerprintOf(newCert);
      });
      assert.equal(
        (await httpsFetch(`${served.url}/healthz`, { ca: newCa, servername: `${SERVICE}.${NAMESPACE}.svc` }))
          .status,
        200,
      );
    } finally {
      await served.close();
    }
  });

  test("missing webhook configurations are reported, not fatal; a missing namespace is", async () => {
    const other = await mkdtemp(join(tmpdir(), "ksf-certs-other-"));
    try {
      const run = await runCerts(["--out", other, "--webhook-config", "not-there"], {
        KUBECONFIG: sandbox.kubeconfigPath,
      });
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stderr, /MutatingWebhookConfiguration not-there not found; apply it and run again/);
      assert.deepEqual(
        (summaryOf(run).webhooks as { status: string }[]).map((w) => w.status),
        ["not found", "not found"],
      );
      const noNamespace = await runCerts(["--out", other, "--namespace", "nowhere", "--force"], {
        KUBECONFIG: sandbox.kubeconfigPath,
      });
      assert.equal(noNamespace.code, 1);
      assert.match(noNamespace.stderr, /certs: failed: .*namespaces "nowhere" not found/);
    } finally {
      await rm(other, { recursive: true, force: true });
    }
  });

  test("certificates kube-apiserver's x509 parser refuses (a PrintableString '@') are replaced by ones it takes", async () => {
    const other = await mkdtemp(join(tmpdir(), "ksf-certs-go-"));
    try {
      const old = printableStringCertificates(SERVICE, NAMESPACE, [
        ...serviceDnsNames(SERVICE, NAMESPACE),
        "localhost",
        "127.0.0.1",
      ]);
      await mkdir(other, { recursive: true });
      await writeFile(join(other, "ca.crt"), old.caCert);
      await writeFile(join(other, "ca.key"), old.caKey);
      await writeFile(join(other, "tls.crt"), old.cert);
      await writeFile(join(other, "tls.key"), old.key);
      const run = await runCerts(["--out", other]);
      assert.equal(run.code, 0, run.stderr);
      const summary = summaryOf(run);
      assert.equal(summary.renewed, true);
      assert.equal(
        summary.reason,
        "the certificate would be refused by kube-apiserver's x509 parser (x509: invalid RDNSequence: invalid attribute value: invalid PrintableString)",
      );
      for (const file of ["ca.crt", "tls.crt"])
        assert.equal(goParseError(await readFile(join(other, file), "utf8")), undefined, file);
    } finally {
      await rm(other, { recursive: true, force: true });
    }
  });

  test("bad arguments exit 2 with the usage", async () => {
    const run = await runCerts(["--valid-days", "soon"]);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /--valid-days must be a positive integer/);
    assert.match(run.stderr, /usage: npm run certs/);
  });
});
