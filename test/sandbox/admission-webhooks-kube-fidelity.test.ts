// The sandbox calls webhooks as kube-apiserver does: reviews shaped member
// for member like those captured from kube-apiserver v1.20.2
// (test/admission/kube-apiserver-1.20-reviews.json), and certificates
// judged by Go's rules with Go's words, so a webhook whose certificate a
// real cluster refuses is refused here too.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";
import forge from "node-forge";
import { generateCertificates } from "../../shared/tls/certificates.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { printableStringCertificates } from "../tls/helpers.ts";

type Review = { kind: string; apiVersion: string; request: Record<string, unknown> };

let sandbox: TestSandbox;
const servers: Server[] = [];
let seen: { path: string; review: Review }[] = [];

async function hookServer(cert: string, key: string): Promise<string> {
  const server = createServer({ cert, key }, (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const review = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Review;
      const path = (req.url ?? "/").split("?")[0] ?? "/";
      seen.push({ path, review });
      // A webhook that checks what it was sent: the patch applies only where the null is.
      const ops =
        path === "/mutate"
          ? [
              { op: "test", path: "/metadata/creationTimestamp", value: null },
              { op: "add", path: "/metadata/labels", value: { patched: "yes" } },
            ]
          : undefined;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          apiVersion: "admission.k8s.io/v1",
          kind: "AdmissionReview",
          response: {
            uid: review.request.uid,
            allowed: true,
            ...(ops && review.request.operation === "CREATE"
              ? { patchType: "JSONPatch", patch: Buffer.from(JSON.stringify(ops)).toString("base64") }
              : {}),
          },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  return `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** What `npm run certs` makes for the hooks Service, valid for 127.0.0.1 too. */
const hookCertificates = () =>
  generateCertificates({ service: "hooks", namespace: "webhooks", extraDnsNames: ["127.0.0.1"] });

function webhookConfigs(
  base: string,
  caPem: string,
  options: { failurePolicy?: "Fail" | "Ignore"; service?: object } = {},
): object[] {
  const hook = (name: string, path: string) => ({
    name,
    clientConfig: {
      ...(options.service ? { service: { ...options.service, path } } : { url: `${base}${path}` }),
      caBundle: Buffer.from(caPem).toString("base64"),
    },
    rules: [
      {
        apiGroups: [""],
        apiVersions: ["v1"],
        operations: ["CREATE", "UPDATE", "DELETE"],
        resources: ["persistentvolumeclaims"],
      },
    ],
    failurePolicy: options.failurePolicy ?? "Fail",
    sideEffects: "None",
    admissionReviewVersions: ["v1"],
  });
  return [
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "MutatingWebhookConfiguration",
      metadata: { name: "m" },
      webhooks: [hook("mutate.example.com", "/mutate")],
    },
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingWebhookConfiguration",
      metadata: { name: "v" },
      webhooks: [hook("validate.example.com", "/validate")],
    },
  ];
}

async function api(
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${sandbox.url}${path}`, {
    method,
    headers: { "content-type": contentType },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const claims = "/api/v1/namespaces/default/persistentvolumeclaims";
const claim = (name: string) => ({
  apiVersion: "v1",
  kind: "PersistentVolumeClaim",
  metadata: { name },
  spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
});

before(async () => {
  // kube-apiserver's default storage plugins on, as on the server the reviews were captured from.
  sandbox = await startTestSandbox({ disableAdmissionPlugins: [] });
});
after(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
  await sandbox.close();
});
beforeEach(async () => {
  await sandbox.admin.reset();
  seen = [];
});

describe("the AdmissionReview the sandbox sends has kube-apiserver's shape", () => {
  const captured = (
    JSON.parse(
      readFileSync(new URL("../admission/kube-apiserver-1.20-reviews.json", import.meta.url), "utf8"),
    ) as { reviews: { seenBy: string; review: Review }[] }
  ).reviews;
  const real = (seenBy: string, operation: string) => {
    const found = captured.find(
      (c) =>
        c.seenBy === seenBy &&
        c.review.request.operation === operation &&
        (c.review.request.resource as { resource: string }).resource === "persistentvolumeclaims" &&
        c.review.request.dryRun === false,
    );
    assert.ok(found);
    return found.review;
  };
  /** Member names at the levels a webhook reads: in order for the review, as a set for the objects (the sandbox stores apiVersion before kind). */
  const shape = (r: Review) => ({
    review: Object.keys(r),
    request: Object.keys(r.request),
    options: Object.keys(r.request.options as object).filter(
      (k) => k !== "fieldManager" && k !== "propagationPolicy",
    ),
    object: r.request.object === null ? null : Object.keys(r.request.object as object).sort(),
    oldObject: r.request.oldObject === null ? null : Object.keys(r.request.oldObject as object).sort(),
  });

  test("CREATE, UPDATE and DELETE: the members kube-apiserver sends, null where it sends null", async () => {
    const certs = hookCertificates();
    const base = await hookServer(certs.cert, certs.key);
    await sandbox.admin.seed(webhookConfigs(base, certs.caCert));
    const created = await api("POST", claims, claim("cap-claim"));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.deepEqual((created.body.metadata as { labels: object }).labels, { patched: "yes" });
    const labelled = await api(
      "PATCH",
      `${claims}/cap-claim`,
      { metadata: { labels: { captured: "yes" } } },
      "application/merge-patch+json",
    );
    assert.equal(labelled.status, 200);
    assert.equal((await api("DELETE", `${claims}/cap-claim`)).status, 200);

    const sent = (path: string, operation: string) => {
      const found = seen.find((s) => s.path === path && s.review.request.operation === operation);
      assert.ok(found, `${path} ${operation}`);
      return found.review;
    };
    for (const [path, seenBy] of [
      ["/mutate", "mutating webhook"],
      ["/validate", "validating webhook"],
    ] as const) {
      for (const operation of ["CREATE", "UPDATE", "DELETE"]) {
        const ours = sent(path, operation);
        const theirs = real(seenBy, operation);
        assert.deepEqual(shape(ours), shape(theirs), `${seenBy} ${operation}`);
        assert.deepEqual(ours.request.kind, theirs.request.kind);
        assert.deepEqual(ours.request.requestResource, theirs.request.requestResource);
        assert.deepEqual(
          { ...(ours.request.options as object), fieldManager: undefined, propagationPolicy: undefined },
          { ...(theirs.request.options as object), fieldManager: undefined, propagationPolicy: undefined },
        );
        assert.match(String(ours.request.uid), /^[0-9a-f-]{36}$/);
      }
    }
    const mutatingCreate = sent("/mutate", "CREATE").request.object as { metadata: Record<string, unknown> };
    // StorageObjectInUseProtection ran before the webhooks, as on the captured server.
    const capturedCreate = real("mutating webhook", "CREATE").request.object as {
      metadata: Record<string, unknown>;
    };
    assert.deepEqual(capturedCreate.metadata.finalizers, ["kubernetes.io/pvc-protection"]);
    assert.deepEqual(mutatingCreate.metadata.finalizers, capturedCreate.metadata.finalizers);
    assert.equal(mutatingCreate.metadata.creationTimestamp, null);
    assert.equal(mutatingCreate.metadata.uid, undefined);
    const validatingCreate = sent("/validate", "CREATE").request.object as {
      metadata: Record<string, unknown>;
    };
    assert.match(String(validatingCreate.metadata.creationTimestamp), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.ok(validatingCreate.metadata.uid);
    // Stored as a Go decoder would read the patched object: the null timestamp is unset, then set.
    const stored = created.body.metadata as { creationTimestamp: unknown };
    assert.match(String(stored.creationTimestamp), /^\d{4}-/);
  });
});

// Certificates made to order with node-forge: one CA, one serving key.
const rsa = () => {
  const { privateKey } = generateKeyPairSync("rsa", {
    modulusLength: 2048,
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
    publicKeyEncoding: { type: "spki", format: "pem" },
  });
  const key = forge.pki.privateKeyFromPem(privateKey) as forge.pki.rsa.PrivateKey;
  return { key, pem: privateKey, publicKey: forge.pki.rsa.setPublicKey(key.n, key.e) };
};
const caKeys = rsa();
const leafKeys = rsa();
const utf8 = forge.asn1.Type.UTF8 as unknown as forge.asn1.Class;
const caName = [{ name: "commonName", value: "test-ca@1764110000", valueTagClass: utf8 }];
const caPem = (() => {
  const ca = forge.pki.createCertificate();
  ca.publicKey = caKeys.publicKey;
  ca.serialNumber = "01";
  ca.validity.notBefore = new Date(Date.now() - 86_400_000);
  ca.validity.notAfter = new Date(Date.now() + 86_400_000 * 30);
  ca.setSubject(caName);
  ca.setIssuer(caName);
  ca.setExtensions([
    { name: "basicConstraints", cA: true, critical: true },
    { name: "keyUsage", keyCertSign: true, digitalSignature: true, critical: true },
  ]);
  ca.sign(caKeys.key, forge.md.sha256.create());
  return forge.pki.certificateToPem(ca);
})();

function serving(o: { cn: string; altNames?: object[]; notAfter?: Date; clientOnly?: boolean }): {
  cert: string;
  key: string;
} {
  const cert = forge.pki.createCertificate();
  cert.publicKey = leafKeys.publicKey;
  cert.serialNumber = "0a";
  cert.validity.notBefore = new Date(Date.now() - 86_400_000 * 10);
  cert.validity.notAfter = o.notAfter ?? new Date(Date.now() + 86_400_000 * 10);
  cert.setSubject([{ name: "commonName", value: o.cn, valueTagClass: utf8 }]);
  cert.setIssuer(caName);
  cert.setExtensions([
    { name: "basicConstraints", cA: false },
    o.clientOnly ? { name: "extKeyUsage", clientAuth: true } : { name: "extKeyUsage", serverAuth: true },
    ...(o.altNames ? [{ name: "subjectAltName", altNames: o.altNames }] : []),
  ]);
  cert.sign(caKeys.key, forge.md.sha256.create());
  return { cert: forge.pki.certificateToPem(cert), key: leafKeys.pem };
}

/** A claim create against webhooks served with `cert`, trusting `ca`; the call's failure text. */
async function refusal(cert: { cert: string; key: string }, ca: string, service?: object): Promise<string> {
  const base = await hookServer(cert.cert, cert.key);
  if (service) await api("PUT", "/_sandbox/services", { "webhooks/hooks": base });
  await sandbox.admin.seed(webhookConfigs(base, ca, service ? { service } : {}));
  const res = await api("POST", claims, claim("c"));
  assert.equal(res.status, 500, JSON.stringify(res.body));
  assert.equal(seen.length, 0, "the webhook never saw a review");
  assert.equal((await api("GET", `${claims}/c`)).status, 404);
  return String(res.body.message);
}

const prefix = (base: string) =>
  `Internal error occurred: failed calling webhook "mutate.example.com": failed to call webhook: Post "${base}/mutate?timeout=10s": `;

describe("webhook certificates are judged as Go judges them", () => {
  test("a CA whose name has '@' in a PrintableString (what npm run certs used to make) fails every call", async () => {
    const old = printableStringCertificates("hooks", "webhooks", ["127.0.0.1", "hooks.webhooks.svc"]);
    const message = await refusal(old, old.caCert);
    assert.match(
      message,
      /^Internal error occurred: failed calling webhook "mutate\.example\.com": failed to call webhook: Post "https:\/\/127\.0\.0\.1:\d+\/mutate\?timeout=10s": /,
    );
    assert.ok(
      message.endsWith(
        "tls: failed to parse certificate from server: x509: invalid RDNSequence: invalid attribute value: invalid PrintableString",
      ),
      message,
    );
  });

  test("the same under failurePolicy Ignore: the claim is created unmutated, the failure recorded", async () => {
    const old = printableStringCertificates("hooks", "webhooks", ["127.0.0.1"]);
    const base = await hookServer(old.cert, old.key);
    await sandbox.admin.seed(webhookConfigs(base, old.caCert, { failurePolicy: "Ignore" }));
    const res = await api("POST", claims, claim("c"));
    assert.equal(res.status, 201);
    assert.equal((res.body.metadata as { labels?: object }).labels, undefined);
    const failures = (await api("GET", "/_sandbox/admission")).body.ignoredFailures as { error: string }[];
    assert.equal(failures.length, 2);
    for (const f of failures) assert.match(f.error, /invalid PrintableString$/);
  });

  test("a serving certificate named only by its commonName: Go ignores the CN", async () => {
    const service = { namespace: "webhooks", name: "hooks", port: 443 };
    const message = await refusal(serving({ cn: "hooks.webhooks.svc" }), caPem, service);
    assert.equal(
      message,
      'Internal error occurred: failed calling webhook "mutate.example.com": failed to call webhook: Post "https://hooks.webhooks.svc:443/mutate?timeout=10s": tls: failed to verify certificate: x509: certificate relies on legacy Common Name field, use SANs instead',
    );
  });

  test("an expired certificate: Go's text, with the times", async () => {
    const notAfter = new Date(Math.floor(Date.now() / 1000) * 1000 - 3_600_000);
    const cert = serving({ cn: "x", altNames: [{ type: 7, ip: "127.0.0.1" }], notAfter });
    const message = await refusal(cert, caPem);
    const expired = message.match(
      /tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time (\S+) is after (\S+)$/,
    );
    assert.ok(expired, message);
    assert.equal(expired[2], notAfter.toISOString().replace(".000Z", "Z"));
    assert.ok(Date.parse(expired[1]!) > notAfter.getTime());
  });

  test("names: an IP the certificate lacks, and a Service name it lacks", async () => {
    const dnsOnly = serving({ cn: "x", altNames: [{ type: 2, value: "localhost" }] });
    assert.ok(
      (await refusal(dnsOnly, caPem)).endsWith(
        "tls: failed to verify certificate: x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs",
      ),
    );
    await sandbox.admin.reset();
    const service = { namespace: "webhooks", name: "hooks", port: 443 };
    const otherNames = serving({
      cn: "x",
      altNames: [
        { type: 2, value: "other.webhooks.svc" },
        { type: 2, value: "*.example.com" },
        { type: 7, ip: "127.0.0.1" },
      ],
    });
    assert.ok(
      (await refusal(otherNames, caPem, service)).endsWith(
        "tls: failed to verify certificate: x509: certificate is valid for other.webhooks.svc, *.example.com, not hooks.webhooks.svc",
      ),
    );
  });

  test("a CA the caBundle does not hold, and a certificate only for clients", async () => {
    const other = hookCertificates();
    const base = await hookServer(other.cert, other.key);
    await sandbox.admin.seed(webhookConfigs(base, caPem));
    const untrusted = await api("POST", claims, claim("c"));
    assert.equal(
      untrusted.body.message,
      `${prefix(base)}tls: failed to verify certificate: x509: certificate signed by unknown authority`,
    );
    await sandbox.admin.reset();
    const clientOnly = serving({ cn: "x", altNames: [{ type: 7, ip: "127.0.0.1" }], clientOnly: true });
    assert.ok(
      (await refusal(clientOnly, caPem)).endsWith(
        "tls: failed to verify certificate: x509: certificate specifies an incompatible key usage",
      ),
    );
  });

  test("the certificates of npm run certs are taken, over a URL and as a Service", async () => {
    const certs = hookCertificates();
    const base = await hookServer(certs.cert, certs.key);
    await sandbox.admin.seed(webhookConfigs(base, certs.caCert));
    assert.equal((await api("POST", claims, claim("by-url"))).status, 201);
    await sandbox.admin.reset();
    await api("PUT", "/_sandbox/services", { "webhooks/hooks": base });
    await sandbox.admin.seed(
      webhookConfigs(base, certs.caCert, { service: { namespace: "webhooks", name: "hooks", port: 443 } }),
    );
    const res = await api("POST", claims, claim("by-service"));
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.deepEqual((res.body.metadata as { labels: object }).labels, { patched: "yes" });
  });
});
