// The admission function against a real kube-apiserver, as an operator
// deploys it: certificates from `npm run certs`, the function serving HTTPS
// on 127.0.0.1, and the webhook configurations of deploy/webhooks.yaml
// registered with `clientConfig.url` and the `caBundle`. Then it shows, on
// the real server, that:
//
//   - a claim without a class gets the default class, and our mutating
//     webhook's own additions (storage-provisioner, finalizers);
//   - a VolumeAttachment create is admitted (failurePolicy Fail: a webhook
//     kube-apiserver cannot call would refuse it), and one naming no
//     installed CSIDriver is refused by our webhook (the hook of
//     deploy/components/attachment-driver-check, registered here to check it);
//   - forbidden claim updates are denied with upstream's message, and our
//     webhook, asked about the same update, denies it with the same words
//     (where upstream changed them, the newest: a shrink below
//     status.capacity, RecoverVolumeExpansionFailure).
//
// kube-apiserver runs its own DefaultStorageClass, PersistentVolumeClaimResize
// and spec validation before any webhook; the script says which of them
// acted, so a pass is never our webhook's credit for the server's work.
//
// One PASS/FAIL line per check on stdout, exit 1 if any failed. Everything it
// creates is removed again. Not part of npm test (it needs the real server):
//
//   bash ../shared/real-cluster/build.sh up
//   node scripts/real-cluster-admission.ts [--kubeconfig PATH] [--driver NAME]
//
// --private-apiserver runs the checks on a kube-apiserver of its own, made
// from the same binaries and PKI, with DefaultStorageClass and
// PersistentVolumeClaimResize off: there our webhooks alone give the default
// class and refuse a resize the class does not allow, the claim UPDATE hook
// registered from deploy/components/no-storage-admission-plugins as an
// operator of such a cluster would.

import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { request as httpsRequest } from "node:https";
import { createServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { claimAdmissionReview } from "../shared/admission/claim-review.ts";
import { isNotFound } from "../shared/kube/api-errors.ts";
import { loadKubeConfig } from "../shared/kube/client.ts";
import { KubeApiError, KubeJsonClient } from "../shared/kube/json-client.ts";
import {
  csiDrivers,
  mutatingWebhookConfigurations,
  persistentVolumeClaims,
  persistentVolumes,
  type ResourceDescriptor,
  storageClasses,
  validatingWebhookConfigurations,
  volumeAttachments,
} from "../shared/kube/resources.ts";
import type { KubeObject, PersistentVolumeClaim } from "../shared/kube/types.ts";
import {
  annBetaStorageProvisioner,
  annStorageProvisioner,
  provisioningFinalizer,
} from "../shared/kube/well-known.ts";
import { goParseError } from "../shared/tls/go-x509.ts";
import { type OptInHooks, webhookConfigurations } from "./webhook-configurations.ts";

const repoRoot = resolve(fileURLToPath(new URL("..", import.meta.url)));
const REAL_CLUSTER_DIR =
  process.env.REAL_CLUSTER_DIR ?? join(homedir(), ".cache/kube-storage-functions/real-cluster");
const REAL_CLUSTER_KUBECONFIG = join(REAL_CLUSTER_DIR, "kubeconfig");
const CONFIG_NAME = "kube-storage-functions-admission-check";
const NAMESPACE = "default";
const UPSTREAM = {
  specImmutable: "spec is immutable after creation except resources.requests",
  // kube-apiserver before RecoverVolumeExpansionFailure (GA in 1.34), and since: our hook follows the newest.
  noShrink: [
    "field can not be less than previous value",
    "field can not be less than status.capacity",
  ] as const,
  resize:
    "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize",
};

interface Check {
  name: string;
  ok: boolean;
  detail: string;
}
const checks: Check[] = [];

function record(name: string, ok: boolean, detail: string): void {
  checks.push({ name, ok, detail });
  process.stdout.write(`${ok ? "PASS" : "FAIL"}  ${name}\n      ${detail.replaceAll("\n", "\n      ")}\n`);
}

const USAGE =
  "usage: node scripts/real-cluster-admission.ts [--kubeconfig PATH | --private-apiserver] [--driver NAME]";

class UsageError extends Error {
  override name = "UsageError";
}

const say = (line: string): void => void process.stderr.write(`real-cluster-admission: ${line}\n`);

function messageOf(err: unknown): string {
  if (err instanceof KubeApiError) {
    const body = err.body as { message?: string } | undefined;
    return `${err.code} ${err.reason ?? ""}: ${body?.message ?? err.message}`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** `npm run certs` into `dir`, files only (no KUBECONFIG: the script registers its own configurations). */
async function makeCertificates(dir: string): Promise<{ caCert: string; cert: string }> {
  const env = { ...process.env };
  delete env.KUBECONFIG;
  const code = await new Promise<number | null>((done, fail) => {
    const child = spawn(
      "npm",
      ["run", "--silent", "certs", "--", "--out", dir, "--extra-sans", "127.0.0.1,localhost", "--force"],
      { cwd: repoRoot, env, stdio: ["ignore", "ignore", "inherit"] },
    );
    child.on("error", fail);
    child.on("exit", done);
  });
  if (code !== 0) throw new Error(`npm run certs exited with ${code}`);
  return {
    caCert: await readFile(join(dir, "ca.crt"), "utf8"),
    cert: await readFile(join(dir, "tls.crt"), "utf8"),
  };
}

/** `FUNCTION=admission npm run serve` over HTTPS on 127.0.0.1; resolves to its URL once ready. */
async function startAdmission(
  dir: string,
  kubeconfig: string,
  driver: string,
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ["functions/serve.ts"], {
    cwd: repoRoot,
    env: {
      ...process.env,
      FUNCTION: "admission",
      HOST: "127.0.0.1",
      PORT: "0",
      KUBECONFIG: kubeconfig,
      TLS_CERT_FILE: join(dir, "tls.crt"),
      TLS_KEY_FILE: join(dir, "tls.key"),
      PROVISIONER_DRIVERS: driver,
      LOG_LEVEL: process.env.LOG_LEVEL ?? "warn",
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const url = await new Promise<string>((done, fail) => {
    const timer = setTimeout(
      () => fail(new Error("the admission function was not ready within 60 s")),
      60_000,
    );
    child.on("exit", (code) => fail(new Error(`the admission function exited with ${code}`)));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      try {
        const ready = JSON.parse(line) as { ready?: boolean; url?: string };
        if (ready.ready && ready.url) {
          clearTimeout(timer);
          done(ready.url);
        }
      } catch {
        // not the ready line
      }
    });
  });
  return { url, child };
}

/** One AdmissionReview straight to our function, verified against our CA: its answer. */
function askFunction(
  url: string,
  caCert: string,
  path: string,
  review: object,
): Promise<{ allowed: boolean; status?: { code?: number; message?: string } }> {
  return new Promise((done, fail) => {
    const body = JSON.stringify(review);
    const req = httpsRequest(
      `${url}${path}`,
      { method: "POST", ca: caCert, headers: { "content-type": "application/json" } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
        });
        res.on("end", () => {
          try {
            done((JSON.parse(text) as { response: { allowed: boolean } }).response);
          } catch {
            fail(new Error(`${path} answered ${res.statusCode}: ${text.slice(0, 300)}`));
          }
        });
      },
    );
    req.on("error", fail);
    req.end(body);
  });
}

function claimUpdateReview(next: PersistentVolumeClaim, old: PersistentVolumeClaim): object {
  return claimAdmissionReview({
    uid: randomUUID(),
    operation: "UPDATE",
    name: old.metadata.name,
    namespace: old.metadata.namespace ?? "",
    userInfo: { username: "real-cluster-admission" },
    object: next,
    oldObject: old,
  });
}

/** A kube-apiserver of our own, started from the real cluster's binaries and PKI. */
interface PrivateApiServer {
  kubeconfig: string;
  stop(): Promise<void>;
}

// The built-in plugins that do what our webhooks do; off, the webhooks are the only ones doing it.
const PLUGINS_OFF = "ServiceAccount,DefaultStorageClass,PersistentVolumeClaimResize";

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.on("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

function readyz(port: number, ca: string, token: string): Promise<boolean> {
  return new Promise((done) => {
    const req = httpsRequest(
      { host: "127.0.0.1", port, path: "/readyz", ca, headers: { authorization: `Bearer ${token}` } },
      (res) => {
        res.resume();
        done(res.statusCode === 200);
      },
    );
    req.on("error", () => done(false));
    req.end();
  });
}

/**
 * kube-apiserver v1.20.2 as ../shared/real-cluster/build.sh runs it (same
 * etcd, PKI and token), on a free port and its own etcd prefix, with
 * DefaultStorageClass and PersistentVolumeClaimResize off: what an operator
 * relying on our webhooks instead of those plugins runs. Its etcd keys are
 * deleted again by stop().
 */
async function startPrivateApiServer(dir: string, suffix: string): Promise<PrivateApiServer> {
  const bin = join(REAL_CLUSTER_DIR, "bin");
  const pki = join(REAL_CLUSTER_DIR, "pki");
  const port = await freePort();
  const prefix = `/ksf-admission-check-${suffix}`;
  const ca = await readFile(join(pki, "ca.crt"), "utf8");
  const token = (await readFile(join(pki, "tokens.csv"), "utf8")).split(",")[0]?.trim() ?? "";
  await mkdir(join(dir, "apiserver-certs"), { recursive: true });
  const log = join(dir, "apiserver.log");
  const child = spawn(
    join(bin, "kube-apiserver"),
    [
      "--etcd-servers=http://127.0.0.1:2379",
      `--etcd-prefix=${prefix}`,
      "--bind-address=127.0.0.1",
      `--secure-port=${port}`,
      "--insecure-port=0",
      "--advertise-address=127.0.0.1",
      "--endpoint-reconciler-type=none",
      `--tls-cert-file=${join(pki, "apiserver.crt")}`,
      `--tls-private-key-file=${join(pki, "apiserver.key")}`,
      `--client-ca-file=${join(pki, "ca.crt")}`,
      `--token-auth-file=${join(pki, "tokens.csv")}`,
      "--authorization-mode=RBAC",
      "--anonymous-auth=false",
      `--service-account-key-file=${join(pki, "sa.pub")}`,
      `--service-account-signing-key-file=${join(pki, "sa.key")}`,
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      "--service-cluster-ip-range=10.0.0.0/24",
      `--cert-dir=${join(dir, "apiserver-certs")}`,
      `--disable-admission-plugins=${PLUGINS_OFF}`,
      "--v=1",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  const lines: string[] = [];
  createInterface({ input: child.stderr! }).on("line", (line) => {
    lines.push(line);
    if (lines.length > 200) lines.shift();
  });
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) {
      child.kill("SIGTERM");
      await Promise.race([exited, new Promise((done) => setTimeout(done, 20_000))]);
    }
    await writeFile(log, lines.join("\n"));
    const etcdctl = spawn(join(bin, "etcdctl"), ["--endpoints=127.0.0.1:2379", "del", "--prefix", prefix], {
      env: { ...process.env, ETCDCTL_API: "3" },
      stdio: "ignore",
    });
    await new Promise((done) => etcdctl.once("exit", done));
  };
  const deadline = Date.now() + 120_000;
  while (!(await readyz(port, ca, token))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(
        `the private kube-apiserver did not become ready; its last words: ${lines.slice(-5).join(" | ")}`,
      );
    }
    await new Promise((done) => setTimeout(done, 500));
  }
  const kubeconfig = join(dir, "kubeconfig");
  await writeFile(
    kubeconfig,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      "current-context": "private",
      clusters: [
        {
          name: "private",
          cluster: { server: `https://127.0.0.1:${port}`, "certificate-authority": join(pki, "ca.crt") },
        },
      ],
      users: [{ name: "admin", user: { token } }],
      contexts: [{ name: "private", context: { cluster: "private", user: "admin", namespace: NAMESPACE } }],
    }),
    { mode: 0o600 },
  );
  say(
    `private kube-apiserver on https://127.0.0.1:${port} (etcd prefix ${prefix}), plugins off: ${PLUGINS_OFF}`,
  );
  return { kubeconfig, stop };
}

async function main(): Promise<void> {
  let values: { kubeconfig?: string; driver?: string; "private-apiserver"?: boolean };
  try {
    values = parseArgs({
      options: {
        kubeconfig: { type: "string" },
        driver: { type: "string" },
        "private-apiserver": { type: "boolean" },
      },
    }).values;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const suffix = randomBytes(3).toString("hex");
  const dir = await mkdtemp(join(tmpdir(), "ksf-admission-check-"));
  let server: PrivateApiServer | undefined;
  try {
    if (values["private-apiserver"]) server = await startPrivateApiServer(dir, suffix);
    await runChecks(
      server?.kubeconfig ?? values.kubeconfig ?? process.env.KUBECONFIG ?? REAL_CLUSTER_KUBECONFIG,
      values.driver ?? "hostpath.csi.k8s.io",
      suffix,
      dir,
      // Without PersistentVolumeClaimResize, the claim UPDATE hook of that component is what refuses a resize.
      { storagePluginsOff: server !== undefined, attachmentDriverCheck: true },
    );
  } finally {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  }
  const failed = checks.filter((c) => !c.ok);
  process.stdout.write(
    `${failed.length === 0 ? "ALL PASSED" : `${failed.length} FAILED`}: ${checks.length - failed.length}/${checks.length} checks\n`,
  );
  process.exitCode = failed.length === 0 ? 0 : 1;
}

async function runChecks(
  kubeconfig: string,
  driver: string,
  suffix: string,
  dir: string,
  hooks: OptInHooks,
): Promise<void> {
  const kube = new KubeJsonClient(loadKubeConfig({ KUBECONFIG: kubeconfig }));
  const names = {
    class: `ksf-check-default-${suffix}`,
    claim: `ksf-check-claim-${suffix}`,
    volume: `ksf-check-pv-${suffix}`,
    attachment: `ksf-check-va-${suffix}`,
  };
  const created: [ResourceDescriptor, string, string | undefined][] = [];
  let fn: { url: string; child: ChildProcess } | undefined;
  try {
    const defaults = (await kube.list<KubeObject>(storageClasses)).items.filter(
      (c) =>
        c.metadata.annotations?.["storageclass.kubernetes.io/is-default-class"] === "true" ||
        c.metadata.annotations?.["storageclass.beta.kubernetes.io/is-default-class"] === "true",
    );
    if (defaults.length > 0)
      throw new Error(
        `the cluster already has a default StorageClass (${defaults.map((c) => c.metadata.name).join(", ")}); a second one makes kube-apiserver 1.20 refuse class-less claims, so the check needs a cluster without one`,
      );

    say(`certificates: npm run certs -- --out ${dir}`);
    const certs = await makeCertificates(dir);
    const refusedBy = goParseError(certs.caCert) ?? goParseError(certs.cert);
    record(
      "the certificates of npm run certs pass Go's x509 parser",
      refusedBy === undefined,
      refusedBy ??
        "ca.crt and tls.crt parse under Go's rules (kube-apiserver's own TLS client is the real test below)",
    );

    fn = await startAdmission(dir, kubeconfig, driver);
    say(`admission function ready at ${fn.url}`);

    await kube.create(storageClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: names.class, annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
      provisioner: driver,
      reclaimPolicy: "Delete",
      volumeBindingMode: "Immediate",
      allowVolumeExpansion: false,
    } as KubeObject);
    created.push([storageClasses, names.class, undefined]);
    let driverCreated = false;
    try {
      await kube.get(csiDrivers, driver);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      await kube.create(csiDrivers, {
        apiVersion: "storage.k8s.io/v1",
        kind: "CSIDriver",
        metadata: { name: driver },
        spec: { attachRequired: true },
      } as KubeObject);
      created.push([csiDrivers, driver, undefined]);
      driverCreated = true;
    }
    say(`StorageClass ${names.class} (default)${driverCreated ? `, CSIDriver ${driver}` : ""} created`);

    const classless = (name: string): PersistentVolumeClaim => ({
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name, namespace: NAMESPACE },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
    });
    // Before our webhooks exist: does kube-apiserver's own DefaultStorageClass plugin set the class?
    const plain = await kube.create(persistentVolumeClaims, classless(`${names.claim}-probe`), {
      dryRun: true,
    });
    const builtInDefault = plain.spec.storageClassName === names.class;

    for (const config of await webhookConfigurations(CONFIG_NAME, fn.url, certs.caCert, hooks)) {
      const r =
        config.kind === "MutatingWebhookConfiguration"
          ? mutatingWebhookConfigurations
          : validatingWebhookConfigurations;
      await kube.delete(r, CONFIG_NAME).catch((err) => {
        if (!isNotFound(err)) throw err;
      });
      await kube.create(r, config);
      created.unshift([r, CONFIG_NAME, undefined]);
    }
    // kube-apiserver picks configurations up from a watch: wait until a dry run shows our mutation.
    const deadline = Date.now() + 15_000;
    for (;;) {
      const dry = await kube.create(persistentVolumeClaims, classless(`${names.claim}-probe`), {
        dryRun: true,
      });
      if (dry.metadata.annotations?.[annStorageProvisioner] !== undefined) break;
      if (Date.now() > deadline)
        throw new Error("kube-apiserver did not call the mutating webhook within 15 s");
      await new Promise((r) => setTimeout(r, 250));
    }
    say(`webhook configurations ${CONFIG_NAME} registered (url + caBundle)`);

    // 1. The default class, and what only our webhook adds at creation.
    const claim = await kube.create(persistentVolumeClaims, classless(names.claim));
    created.unshift([persistentVolumeClaims, names.claim, NAMESPACE]);
    const ours = {
      class: claim.spec.storageClassName,
      provisioner: claim.metadata.annotations?.[annStorageProvisioner],
      betaProvisioner: claim.metadata.annotations?.[annBetaStorageProvisioner],
      finalizers: claim.metadata.finalizers ?? [],
    };
    record(
      "a claim without a class gets the default class; our mutating webhook ran on it",
      ours.class === names.class &&
        ours.provisioner === driver &&
        ours.betaProvisioner === driver &&
        ours.finalizers.includes(provisioningFinalizer),
      `spec.storageClassName=${ours.class}, storage-provisioner=${ours.provisioner}, finalizers=${ours.finalizers.join(",")}\n` +
        (builtInDefault
          ? "kube-apiserver's own DefaultStorageClass plugin is enabled and runs before webhooks: it set the class (a dry run without our webhooks got it too); the storage-provisioner annotations and our finalizer come from our webhook"
          : "kube-apiserver's DefaultStorageClass plugin is off (a dry run without our webhooks got no class): the class came from our webhook"),
    );

    // 2. VolumeAttachments: failurePolicy Fail, so admitted means kube-apiserver called us and we said yes.
    const attachment = (name: string, attacher: string): KubeObject =>
      ({
        apiVersion: "storage.k8s.io/v1",
        kind: "VolumeAttachment",
        metadata: { name },
        spec: { attacher, nodeName: "ksf-check-node", source: { persistentVolumeName: names.volume } },
      }) as KubeObject;
    try {
      await kube.create(volumeAttachments, attachment(names.attachment, driver));
      created.unshift([volumeAttachments, names.attachment, undefined]);
      record(
        "a VolumeAttachment create is admitted (webhook failurePolicy Fail)",
        true,
        `volumeattachment ${names.attachment} created, attacher ${driver}`,
      );
    } catch (err) {
      record("a VolumeAttachment create is admitted (webhook failurePolicy Fail)", false, messageOf(err));
    }
    const unknown = `not-installed-${suffix}.csi.example.com`;
    try {
      await kube.create(volumeAttachments, attachment(`${names.attachment}-unknown`, unknown));
      created.unshift([volumeAttachments, `${names.attachment}-unknown`, undefined]);
      record(
        "a VolumeAttachment for a driver that is not installed is refused by our webhook",
        false,
        "it was created",
      );
    } catch (err) {
      const text = messageOf(err);
      record(
        "a VolumeAttachment for a driver that is not installed is refused by our webhook",
        text.includes(
          'admission webhook "volumeattachments.validate.storage.kube-storage-functions.io" denied the request',
        ) && text.includes(`no CSIDriver named "${unknown}" exists`),
        text,
      );
    }

    // 3. Forbidden claim updates: denied by the server with upstream's words, and by our webhook alike.
    // Where upstream's words changed across versions (`[older, newest]`), the server may say either
    // (its version's) and our webhook says the newest.
    const forbidden = async (
      name: string,
      change: (c: PersistentVolumeClaim) => void,
      words: string | readonly [string, string],
    ): Promise<void> => {
      const serverWords = typeof words === "string" ? [words] : words;
      const ourWords = typeof words === "string" ? words : words[1];
      const old = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, names.claim, NAMESPACE);
      const next = structuredClone(old);
      change(next);
      let denial: string | undefined;
      try {
        await kube.replace(persistentVolumeClaims, next);
      } catch (err) {
        denial = messageOf(err);
      }
      const verdict = await askFunction(
        fn!.url,
        certs.caCert,
        "/validate/persistentvolumeclaims",
        claimUpdateReview(next, old),
      );
      const byWebhook = denial?.includes("admission webhook") === true;
      record(
        name,
        serverWords.some((w) => denial?.includes(w) === true) &&
          !verdict.allowed &&
          (verdict.status?.message ?? "").includes(ourWords),
        `kube-apiserver: ${denial ?? "ALLOWED"}\n` +
          `  (denied by ${byWebhook ? "our webhook" : "kube-apiserver itself, before any validating webhook"})\n` +
          `our webhook, asked the same: ${verdict.allowed ? "ALLOWED" : `${verdict.status?.code} ${verdict.status?.message}`}`,
      );
    };
    await forbidden(
      "changing spec.storageClassName of a claim is denied with upstream's message",
      (c) => {
        c.spec.storageClassName = `${names.class}-other`;
      },
      UPSTREAM.specImmutable,
    );

    // Bind it by hand (no controllers run here): a PV, spec.volumeName once, status Bound.
    await kube.create(persistentVolumes, {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: names.volume },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        persistentVolumeReclaimPolicy: "Retain",
        storageClassName: names.class,
        claimRef: { namespace: NAMESPACE, name: names.claim, uid: claim.metadata.uid },
        csi: { driver, volumeHandle: names.volume },
      },
    } as KubeObject);
    created.unshift([persistentVolumes, names.volume, undefined]);
    await kube.patch(
      persistentVolumeClaims,
      names.claim,
      NAMESPACE,
      { spec: { volumeName: names.volume } },
      "merge",
    );
    await kube.patch(
      persistentVolumeClaims,
      names.claim,
      NAMESPACE,
      { status: { phase: "Bound", accessModes: ["ReadWriteOnce"], capacity: { storage: "1Gi" } } },
      "merge",
      { subresource: "status" },
    );
    const setSize = (size: string) => (c: PersistentVolumeClaim) => {
      c.spec.resources = { ...c.spec.resources, requests: { ...c.spec.resources?.requests, storage: size } };
    };
    await forbidden(
      "shrinking a bound claim is denied with upstream's message",
      setSize("500Mi"),
      UPSTREAM.noShrink,
    );
    await forbidden(
      "growing a bound claim whose class does not allow expansion is denied with upstream's message",
      setSize("2Gi"),
      UPSTREAM.resize,
    );
  } catch (err) {
    record("the check ran to the end", false, messageOf(err));
  } finally {
    for (const [r, name, namespace] of created) {
      try {
        if (r === persistentVolumeClaims || r === persistentVolumes)
          await kube.patch(r, name, namespace, { metadata: { finalizers: null } }, "merge");
        await kube.delete(r, name, namespace);
      } catch (err) {
        if (!isNotFound(err)) say(`cleanup: ${r.kind} ${name}: ${messageOf(err)}`);
      }
    }
    if (fn !== undefined && fn.child.exitCode === null) {
      const exited = new Promise((done) => fn!.child.once("exit", done));
      fn.child.kill("SIGTERM");
      await Promise.race([exited, new Promise((done) => setTimeout(done, 15_000))]);
    }
    await kube.close();
    say(`cleaned up ${created.length} objects`);
  }
}

try {
  await main();
} catch (err) {
  if (err instanceof UsageError) {
    say(`${err.message}\n${USAGE}`);
    process.exitCode = 2;
  } else {
    say(
      `failed before any check: ${messageOf(err)} (is the server up? bash ../shared/real-cluster/build.sh up)`,
    );
    process.exitCode = 1;
  }
}
