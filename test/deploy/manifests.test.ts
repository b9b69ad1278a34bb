// deploy/ against the code: every Knative Service runs an existing function
// under an existing ServiceAccount, each ApiServerSource forwards exactly the
// kinds its controller handles (found by driving the real controllers), each
// PingSource hits /resync, and the webhook configurations name exactly the
// admission function's routes, with the settings kube-apiserver needs. The
// controllers accept events only with Knative Eventing's OIDC tokens from
// their own sources.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { stop as stopEsbuild } from "esbuild";
import { FUNCTION_NODE_OPTIONS, FUNCTION_PROCESS_ENV } from "../../functions/node-options.ts";
import { FUNCTION_NAMES } from "../../functions/serve.ts";
import { buildFunctions, SERVE_BUNDLE } from "../../scripts/build-functions.ts";
import { defaultAdmissionConfig } from "../../shared/admission/config.ts";
import { createAdmissionHooks } from "../../shared/admission/hooks.ts";
import { AttachDetachController } from "../../shared/attach-detach/runtime/attach-detach-controller.ts";
import { AttacherController } from "../../shared/attacher/runtime/attacher-controller.ts";
import { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import { parseCsiEndpoint } from "../../shared/csi/endpoint.ts";
import { authPolicyFromEnv } from "../../shared/http/auth.ts";
import type { Controller, ControllerEvent } from "../../shared/http/controller-function.ts";
import { isRecord } from "../../shared/is-record.ts";
import { apiVersionOf, type ResourceDescriptor } from "../../shared/kube/resources.ts";
import { ProtectionController } from "../../shared/protection/runtime/protection-controller.ts";
import { defaultProvisionerOptions } from "../../shared/provisioner/options.ts";
import { ProvisionerController } from "../../shared/provisioner/runtime/provisioner-controller.ts";
import { ResizerController } from "../../shared/resizer/runtime/resizer-controller.ts";
import { descriptors, REPO } from "./code-rbac.ts";
import {
  containersOf,
  DEPLOY,
  envOf,
  field,
  kubectlKustomize,
  loadManifests,
  type Manifest,
  ofKind,
  readKustomization,
  servingContainer,
  yamlDocuments,
} from "./manifests.ts";

const NAMESPACE = "kube-storage-functions";
const manifests = loadManifests();
const ksvcs = ofKind(manifests, "Service").filter((m) => m.apiVersion === "serving.knative.dev/v1");
const CONTROLLERS = ["binder", "provisioner", "attacher", "resizer", "attach-detach", "protection"] as const;
/** The functions that call the driver's controller service. */
const CSI_FUNCTIONS = ["provisioner", "attacher", "resizer"] as const;

function ksvcOfFunction(name: string): Manifest {
  const found = ksvcs.filter((k) => envOf(servingContainer(k)).get("FUNCTION") === name);
  assert.equal(found.length, 1, `exactly one Knative Service runs FUNCTION=${name}`);
  return found[0] as Manifest;
}

/**
 * A stand-in for the API client / CSI client / recorder that records that
 * the controller reached for it and then fails: "this controller acts on the
 * event" without a cluster.
 */
function touchRecorder(): { client: unknown; touched: () => boolean } {
  let touched = false;
  const client = new Proxy(
    {},
    {
      get(_target, prop) {
        // Not a thenable: awaiting the client itself must not look like a call.
        if (prop === "then") return undefined;
        return () => {
          touched = true;
          // Rejected, but marked handled: code that starts several calls at once
          // and awaits one must not leave an unhandled rejection behind.
          const failed = Promise.reject(new Error(`touched ${String(prop)}`));
          failed.catch(() => undefined);
          return failed;
        };
      },
    },
  );
  return { client, touched: () => touched };
}

type ControllerFactory = (deps: { kube: never; csi: never; events: never }) => Controller;

const factories: Record<(typeof CONTROLLERS)[number], ControllerFactory> = {
  binder: ({ kube, events }) => new BinderController({ kube, events }),
  provisioner: ({ kube, csi, events }) =>
    new ProvisionerController({
      kube,
      csi,
      events,
      driverName: "hostpath.csi.k8s.io",
      options: defaultProvisionerOptions("hostpath.csi.k8s.io"),
    }),
  attacher: ({ kube, csi }) => new AttacherController({ kube, csi, driverName: "hostpath.csi.k8s.io" }),
  resizer: ({ kube, csi, events }) =>
    new ResizerController({
      kube,
      csi,
      events,
      driverName: "hostpath.csi.k8s.io",
      abilities: { controllerExpand: true, nodeExpand: true, modify: true, singleNodeMultiWriter: false },
    }),
  "attach-detach": ({ kube, events }) => new AttachDetachController({ kube, events }),
  protection: ({ kube }) => new ProtectionController({ kube }),
};

/** The kinds (apiVersion/Kind) whose events make the controller read the cluster or call the driver. */
async function handledKinds(name: (typeof CONTROLLERS)[number]): Promise<string[]> {
  const handled: string[] = [];
  for (const r of descriptors().values()) {
    const probe = touchRecorder();
    const client = probe.client as never;
    const controller = factories[name]({ kube: client, csi: client, events: client });
    const event: ControllerEvent = {
      action: "update",
      kind: r.kind,
      apiVersion: apiVersionOf(r),
      name: "probe",
      ...(r.namespaced ? { namespace: "default" } : {}),
    };
    const reports = await controller.handleEvent(event).catch(() => undefined);
    if (probe.touched() || (reports !== undefined && reports.length > 0))
      handled.push(`${apiVersionOf(r)}/${r.kind}`);
  }
  return handled.sort();
}

function sinkName(source: Manifest): string | undefined {
  const ref = field(source, "spec.sink.ref");
  if (!isRecord(ref)) return undefined;
  assert.equal(
    ref.apiVersion,
    "serving.knative.dev/v1",
    `${source.metadata.name}: sink is a Knative Service`,
  );
  assert.equal(ref.kind, "Service", `${source.metadata.name}: sink is a Knative Service`);
  return typeof ref.name === "string" ? ref.name : undefined;
}

describe("kustomization", () => {
  it("lists every manifest in deploy/ and puts namespaced objects in kube-storage-functions", () => {
    const k = readKustomization();
    assert.equal(k.namespace, NAMESPACE);
    const files = readdirSync(DEPLOY)
      .filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml")
      .sort();
    assert.deepEqual(
      [...(k.resources ?? [])].sort(),
      files,
      "a manifest in deploy/ that kustomize would not apply",
    );
    const ns = ofKind(manifests, "Namespace");
    assert.deepEqual(
      ns.map((n) => n.metadata.name),
      [NAMESPACE],
    );
    for (const m of manifests) {
      if (m.metadata.namespace !== undefined)
        assert.equal(m.metadata.namespace, NAMESPACE, `${m.kind} ${m.metadata.name}`);
    }
  });

  it("names each object once per kind", () => {
    const seen = new Set<string>();
    for (const m of manifests) {
      const key = `${m.apiVersion}/${m.kind}/${m.metadata.namespace ?? ""}/${m.metadata.name}`;
      assert.ok(!seen.has(key), `duplicate ${key}`);
      seen.add(key);
    }
  });

  it("sets the image the Knative Services use", () => {
    const images = new Set(ksvcs.flatMap((k) => containersOf(k).map((c) => c.image)));
    assert.deepEqual([...images], ["kube-storage-functions"], "one image for every function");
    const k = readKustomization();
    assert.ok(
      (k.images ?? []).some((i) => i.name === "kube-storage-functions" && i.newName),
      "kustomization maps the image name to a registry",
    );
  });
});

describe("Knative Services", () => {
  const accounts = new Set(ofKind(manifests, "ServiceAccount").map((s) => s.metadata.name));

  it("one per function, each running an existing function under its own ServiceAccount", () => {
    assert.deepEqual(
      ksvcs.map((k) => envOf(servingContainer(k)).get("FUNCTION")).sort(),
      [...FUNCTION_NAMES].sort(),
    );
    for (const ksvc of ksvcs) {
      const name = ksvc.metadata.name;
      for (const container of containersOf(ksvc)) {
        const fn = envOf(container).get("FUNCTION") ?? "";
        assert.ok(
          (FUNCTION_NAMES as readonly string[]).includes(fn),
          `${name}/${container.name}: FUNCTION ${fn}`,
        );
        assert.ok(existsSync(join(REPO, "functions", fn, "main.ts")), `functions/${fn}/main.ts exists`);
        assert.equal(fn, name, `the Knative Service is named after its function (${name})`);
        // The image runs as uid 1000 and keeps no local state.
        assert.equal(container.securityContext?.runAsNonRoot, true, `${name}/${container.name} runAsNonRoot`);
        assert.equal(container.securityContext?.allowPrivilegeEscalation, false);
        assert.equal(container.securityContext?.readOnlyRootFilesystem, true);
      }
      const account = field(ksvc, "spec.template.spec.serviceAccountName");
      assert.equal(account, name, `${name} runs as its own ServiceAccount`);
      assert.ok(accounts.has(name), `ServiceAccount ${name} is in deploy/`);
      const serving = servingContainer(ksvc);
      assert.equal(serving.name, name);
      // protocol spelled out as Knative defaults it, so re-applying the manifests changes nothing.
      assert.deepEqual(
        serving.ports,
        [{ containerPort: 8080, protocol: "TCP" }],
        `${name}: one HTTP port; Knative sets PORT`,
      );
      assert.ok(!envOf(serving).has("PORT"), "Knative reserves PORT on the serving container");
      assert.equal(field(serving, "readinessProbe.httpGet.path"), "/readyz");
      assert.equal(field(serving, "livenessProbe.httpGet.path"), "/healthz");
      assert.equal(
        ksvc.metadata.labels?.["networking.knative.dev/visibility"],
        "cluster-local",
        `${name} is not exposed outside the cluster`,
      );
    }
  });

  it("the resizer runs with upstream external-resizer's --timeout (10 s) and --workers (10)", () => {
    const env = envOf(servingContainer(ksvcOfFunction("resizer")));
    assert.equal(env.get("CSI_TIMEOUT_SECONDS"), "10");
    assert.equal(env.get("WORKERS"), "10");
    // A resync pass makes a CSI call per claim: the request may last as long as the provisioner's and attacher's.
    for (const name of CSI_FUNCTIONS)
      assert.equal(field(ksvcOfFunction(name), "spec.template.spec.timeoutSeconds"), 300, name);
  });

  it("the admission function never scales to zero; controllers may", () => {
    const admission = ksvcOfFunction("admission");
    const annotations = field(admission, "spec.template.metadata.annotations") as Record<string, string>;
    assert.equal(annotations["autoscaling.knative.dev/min-scale"], "1");
    for (const name of CONTROLLERS) {
      const a = (field(ksvcOfFunction(name), "spec.template.metadata.annotations") ?? {}) as Record<
        string,
        string
      >;
      assert.ok(
        !("autoscaling.knative.dev/min-scale" in a) || a["autoscaling.knative.dev/min-scale"] === "0",
        name,
      );
    }
  });

  it("the provisioner, attacher and resizer reach the CSI driver over TCP (a pod's unix socket cannot be shared)", () => {
    for (const name of CSI_FUNCTIONS) {
      const env = envOf(servingContainer(ksvcOfFunction(name)));
      const endpoint = parseCsiEndpoint(env.get("CSI_ENDPOINT") ?? "");
      assert.equal(endpoint.transport, "tcp", `${name}: CSI_ENDPOINT ${env.get("CSI_ENDPOINT")}`);
      assert.ok(env.get("DRIVER_NAME"), `${name}: DRIVER_NAME pins the driver`);
    }
    // One driver: every CSI function names the same endpoint and driver.
    const pairs = CSI_FUNCTIONS.map((name) => {
      const env = envOf(servingContainer(ksvcOfFunction(name)));
      return `${env.get("CSI_ENDPOINT")} ${env.get("DRIVER_NAME")}`;
    });
    assert.equal(new Set(pairs).size, 1, pairs.join(" | "));
    for (const name of ["binder", "attach-detach", "protection", "admission"]) {
      assert.ok(
        !envOf(servingContainer(ksvcOfFunction(name))).has("CSI_ENDPOINT"),
        `${name} does not talk CSI`,
      );
    }
  });
});

describe("event sources", () => {
  const sources = ofKind(manifests, "ApiServerSource");
  const pings = ofKind(manifests, "PingSource");

  for (const name of CONTROLLERS) {
    it(`${name}: one ApiServerSource in Resource mode with exactly the kinds handleEvent acts on`, async () => {
      const mine = sources.filter((s) => sinkName(s) === name);
      assert.equal(mine.length, 1, `ApiServerSources for ${name}`);
      const source = mine[0] as Manifest;
      assert.equal(source.apiVersion, "sources.knative.dev/v1");
      assert.equal(field(source, "spec.mode"), "Resource");
      const kinds = (field(source, "spec.resources") as { apiVersion: string; kind: string }[])
        .map((r) => `${r.apiVersion}/${r.kind}`)
        .sort();
      assert.deepEqual(kinds, await handledKinds(name));
      // Claims and pods live in every namespace: the source must watch them all.
      const namespacedKinds = kinds.filter((k) =>
        [...descriptors().values()].some((r) => r.namespaced && `${apiVersionOf(r)}/${r.kind}` === k),
      );
      if (namespacedKinds.length > 0)
        assert.deepEqual(field(source, "spec.namespaceSelector"), {}, `${name}: all namespaces`);
    });

    it(`${name}: a PingSource POSTs /resync every minute`, () => {
      const mine = pings.filter((p) => sinkName(p) === name);
      assert.equal(mine.length, 1, `PingSources for ${name}`);
      const ping = mine[0] as Manifest;
      assert.equal(ping.apiVersion, "sources.knative.dev/v1");
      assert.equal(field(ping, "spec.sink.uri"), "/resync");
      assert.equal(field(ping, "spec.schedule"), "* * * * *");
    });
  }

  it("the admission function gets no events", () => {
    for (const s of [...sources, ...pings]) assert.notEqual(sinkName(s), "admission");
  });

  it("every source's sink is one of our Knative Services and its ServiceAccount may list and watch its kinds", () => {
    const names = new Set(ksvcs.map((k) => k.metadata.name));
    const roles = new Map(ofKind(manifests, "ClusterRole").map((r) => [r.metadata.name, r]));
    const byKind = new Map([...descriptors().values()].map((r) => [`${apiVersionOf(r)}/${r.kind}`, r]));
    for (const s of [...sources, ...pings])
      assert.ok(names.has(sinkName(s) ?? ""), `${s.metadata.name} sink`);
    for (const source of sources) {
      const account = field(source, "spec.serviceAccountName");
      assert.equal(typeof account, "string", `${source.metadata.name} names its ServiceAccount`);
      const bindings = ofKind(manifests, "ClusterRoleBinding").filter((b) =>
        ((b.subjects as { kind: string; name: string; namespace: string }[] | undefined) ?? []).some(
          (s) => s.kind === "ServiceAccount" && s.name === account && s.namespace === NAMESPACE,
        ),
      );
      const rules = bindings.flatMap(
        (b) => (field(roles.get(field(b, "roleRef.name") as string), "rules") ?? []) as Rule[],
      );
      for (const r of field(source, "spec.resources") as { apiVersion: string; kind: string }[]) {
        const d = byKind.get(`${r.apiVersion}/${r.kind}`) as ResourceDescriptor;
        for (const verb of ["get", "list", "watch"])
          assert.ok(allows(rules, d.group, d.plural, verb), `${account} may ${verb} ${d.plural}`);
      }
    }
  });
});

/**
 * The OIDC identity Knative Eventing gives a source with `authentication-oidc`
 * enabled (knative/eventing pkg/auth GetOIDCServiceAccountNameForResource):
 * kmeta.ChildName(<name>, "-oidc-<group>-<kind>"), lower case. ChildName hashes
 * names over 63 characters; ours stay below, so the name is the plain join.
 */
function oidcUsername(source: Manifest): string {
  const group = source.apiVersion.split("/")[0] ?? "";
  const account = `${source.metadata.name}-oidc-${group}-${source.kind}`.toLowerCase();
  assert.ok(account.length <= 63, `${account}: Knative would shorten it with a hash`);
  return `system:serviceaccount:${source.metadata.namespace}:${account}`;
}

describe("event authentication", () => {
  const senders = [...ofKind(manifests, "ApiServerSource"), ...ofKind(manifests, "PingSource")];
  const list = (raw: string | undefined) => (raw ?? "").split(/[\s,]+/).filter((s) => s !== "");

  for (const name of CONTROLLERS) {
    it(`${name}: tokenreview for its sources' audience and OIDC identities only`, () => {
      const ksvc = ksvcOfFunction(name);
      const env = envOf(servingContainer(ksvc));
      assert.equal(env.get("AUTH_MODE"), "tokenreview", `${name}: event endpoints authenticated`);
      // Knative's audience form, <group>/<kind>/<namespace>/<name> in lower case.
      const audience = `serving.knative.dev/service/${ksvc.metadata.namespace}/${ksvc.metadata.name}`;
      assert.deepEqual(list(env.get("AUTH_TOKEN_AUDIENCES")), [audience]);
      const mine = senders.filter((s) => sinkName(s) === name);
      assert.equal(mine.length, 2, `${name}: an ApiServerSource and a PingSource`);
      for (const source of mine)
        assert.equal(
          field(source, "spec.sink.audience"),
          audience,
          `${source.metadata.name}: a Knative Service announces no audience; the sink names it`,
        );
      assert.deepEqual(list(env.get("AUTH_ALLOWED_USERS")).sort(), mine.map(oidcUsername).sort());
      // The code reads the settings the same way (and would refuse to start on a mistake).
      const policy = authPolicyFromEnv(Object.fromEntries(env), {
        kube: () => ({ create: async () => assert.fail("no API call at start") }),
      });
      assert.equal(policy?.mode, "tokenreview");
      assert.deepEqual([...(policy?.allowedUsers ?? [])].sort(), mine.map(oidcUsername).sort());
    });
  }

  it("the admission function has no AUTH_MODE: kube-apiserver sends webhooks no token", () => {
    for (const container of containersOf(ksvcOfFunction("admission")))
      for (const key of envOf(container).keys())
        assert.ok(!key.startsWith("AUTH_"), `admission/${container.name}: ${key}`);
  });

  it("the optional fallback NetworkPolicy stays out of the kustomization and covers only the controllers", () => {
    assert.ok(!(readKustomization().resources ?? []).some((r) => r.startsWith("optional")));
    const docs = yamlDocuments(join(DEPLOY, "optional", "networkpolicy.yaml")).filter(isRecord);
    assert.equal(docs.length, 1);
    const policy = docs[0] as Record<string, unknown>;
    assert.equal(policy.kind, "NetworkPolicy");
    assert.equal(field(policy, "metadata.namespace"), NAMESPACE, "applied with kubectl -f, so it names it");
    assert.deepEqual(field(policy, "spec.policyTypes"), ["Ingress"]);
    assert.deepEqual(field(policy, "spec.podSelector.matchExpressions"), [
      { key: "serving.knative.dev/service", operator: "In", values: [...CONTROLLERS] },
    ]);
  });
});

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

function allows(rules: readonly Rule[], group: string, resource: string, verb: string): boolean {
  return rules.some(
    (r) => r.apiGroups.includes(group) && r.resources.includes(resource) && r.verbs.includes(verb),
  );
}

describe("admission webhooks", () => {
  const hooks = createAdmissionHooks({
    lookups: touchRecorder().client as never,
    config: defaultAdmissionConfig(),
  });
  // Every route has a hook once components/no-storage-admission-plugins and
  // components/attachment-driver-check are added; the default has one.
  const PLUGINS_OFF = "components/no-storage-admission-plugins";
  const DRIVER_CHECK = "components/attachment-driver-check";
  const everyHook = loadManifests([PLUGINS_OFF, DRIVER_CHECK]);
  const mutating = ofKind(everyHook, "MutatingWebhookConfiguration");
  const validating = ofKind(everyHook, "ValidatingWebhookConfiguration");
  type Webhook = {
    name: string;
    clientConfig: {
      service?: { name: string; namespace: string; path: string; port?: number };
      url?: string;
      caBundle?: string;
    };
    rules: {
      apiGroups: string[];
      apiVersions: string[];
      operations: string[];
      resources: string[];
      scope: string;
    }[];
    failurePolicy?: string;
    sideEffects?: string;
    timeoutSeconds?: number;
    admissionReviewVersions?: string[];
  };
  const webhooks = [...mutating, ...validating].flatMap((c) =>
    ((c.webhooks as Webhook[] | undefined) ?? []).map((w) => ({ config: c, webhook: w })),
  );
  const certsScript = readFileSync(join(REPO, "scripts", "certs.ts"), "utf8");
  const certDefault = (variable: string): string | undefined =>
    new RegExp(`"${variable}",\\s*"([^"]+)"`).exec(certsScript)?.[1];

  it("the default registers only the hooks kube-apiserver's default plugins do not do already", () => {
    const byDefault = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"].flatMap((kind) =>
      ofKind(manifests, kind).flatMap((c) =>
        ((c.webhooks as Webhook[] | undefined) ?? []).map((w) => w.clientConfig.service?.path),
      ),
    );
    // The hand-over at claim creation, failing open: nothing in the default can block a write.
    assert.deepEqual(byDefault, ["/mutate/persistentvolumeclaims"]);
    const pathsOf = (components: readonly string[]) =>
      ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
        .flatMap((kind) =>
          ofKind(loadManifests(components), kind).flatMap((c) =>
            ((c.webhooks as Webhook[] | undefined) ?? []).map((w) => w.clientConfig.service?.path ?? ""),
          ),
        )
        .filter((path) => !byDefault.includes(path))
        .sort();
    for (const [component, adds] of [
      [PLUGINS_OFF, ["/mutate/persistentvolumes", "/validate/persistentvolumeclaims"]],
      [DRIVER_CHECK, ["/validate/volumeattachments"]],
    ] as const) {
      const kustomization = readKustomization(component);
      assert.equal(kustomization.kind, "Component");
      assert.deepEqual(kustomization.resources ?? [], [], `${component} only adds hooks`);
      assert.deepEqual(pathsOf([component]), adds, component);
      const rendered = kubectlKustomize([component]);
      if (rendered) {
        const paths = rendered
          .filter((m) => /WebhookConfiguration$/.test(m.kind))
          .flatMap((c) =>
            ((c.webhooks as Webhook[] | undefined) ?? []).map((w) => w.clientConfig.service?.path ?? ""),
          );
        assert.deepEqual(paths.sort(), [...byDefault, ...adds].sort(), `kubectl kustomize ${component}`);
      }
    }
  });

  it("one webhook per admission route, mutate/validate by its path", () => {
    assert.deepEqual(
      webhooks.map((w) => w.webhook.clientConfig.service?.path).sort(),
      hooks.map((h) => h.path).sort(),
    );
    for (const { config, webhook } of webhooks) {
      const path = webhook.clientConfig.service?.path ?? "";
      assert.equal(
        config.kind,
        path.startsWith("/mutate/") ? "MutatingWebhookConfiguration" : "ValidatingWebhookConfiguration",
        path,
      );
      assert.equal(config.apiVersion, "admissionregistration.k8s.io/v1");
      assert.match(webhook.name, /^[a-z0-9-]+(\.[a-z0-9-]+){2,}$/, "webhook names are fully qualified");
    }
  });

  it("rules match the resource each route reviews, with the right scope", () => {
    const scopes = new Map([...descriptors().values()].map((r) => [`${r.group}/${r.plural}`, r.namespaced]));
    for (const { webhook } of webhooks) {
      const hook = hooks.find((h) => h.path === webhook.clientConfig.service?.path);
      assert.ok(hook);
      assert.equal(webhook.rules.length, 1, webhook.name);
      const rule = webhook.rules[0] as Webhook["rules"][number];
      assert.deepEqual(rule.apiGroups, [hook.serves.group]);
      assert.deepEqual(rule.apiVersions, ["v1"]);
      // The main resource only: "/status" writes are not reviewed.
      assert.deepEqual(rule.resources, [hook.serves.resource]);
      const namespaced = scopes.get(`${hook.serves.group}/${hook.serves.resource}`);
      assert.equal(rule.scope, namespaced ? "Namespaced" : "Cluster", `${webhook.name} scope`);
      assert.ok(rule.operations.length > 0 && rule.operations.every((o) => ["CREATE", "UPDATE"].includes(o)));
      assert.deepEqual(
        rule.operations,
        hook.path.startsWith("/mutate/") || hook.path.endsWith("volumeattachments") ? ["CREATE"] : ["UPDATE"],
      );
    }
  });

  it("settings kube-apiserver needs: v1 reviews, no side effects, a short timeout, an explicit failure policy", () => {
    for (const { webhook } of webhooks) {
      assert.deepEqual(webhook.admissionReviewVersions, ["v1"], webhook.name);
      assert.equal(webhook.sideEffects, "None", webhook.name);
      assert.equal(webhook.timeoutSeconds, 5, webhook.name);
      assert.ok(webhook.failurePolicy === "Ignore" || webhook.failurePolicy === "Fail", webhook.name);
      assert.equal(
        webhook.clientConfig.caBundle,
        undefined,
        "caBundle comes from npm run certs, never from the manifest",
      );
      assert.equal(webhook.clientConfig.url, undefined, "in-cluster: a Service reference");
    }
    const policy = new Map(
      webhooks.map((w) => [w.webhook.clientConfig.service?.path, w.webhook.failurePolicy]),
    );
    // Creation of claims and PVs never depends on the webhook; with the opt-in check, VA creation is checked or refused.
    assert.equal(policy.get("/mutate/persistentvolumeclaims"), "Ignore");
    assert.equal(policy.get("/validate/persistentvolumeclaims"), "Ignore");
    assert.equal(policy.get("/mutate/persistentvolumes"), "Ignore");
    assert.equal(policy.get("/validate/volumeattachments"), "Fail");
    const explained = (file: string): number =>
      (readFileSync(join(DEPLOY, file), "utf8").match(/^\s+# (Ignore|Fail):/gm) ?? []).length;
    assert.equal(
      explained("webhooks.yaml") +
        explained(join(PLUGINS_OFF, "kustomization.yaml")) +
        explained(join(DRIVER_CHECK, "kustomization.yaml")),
      webhooks.length,
      "each failurePolicy is explained",
    );
  });

  it("the webhook Service, Secret and configuration names are the ones `npm run certs` patches", () => {
    const service = certDefault("CERT_SERVICE");
    const namespace = certDefault("CERT_NAMESPACE");
    const configName = certDefault("WEBHOOK_CONFIG_NAME");
    assert.ok(service && namespace && configName, "scripts/certs.ts defaults found");
    assert.equal(namespace, NAMESPACE);
    for (const c of [...mutating, ...validating]) assert.equal(c.metadata.name, configName);
    for (const { webhook } of webhooks) {
      assert.equal(webhook.clientConfig.service?.name, service);
      assert.equal(webhook.clientConfig.service?.namespace, namespace);
      assert.equal(webhook.clientConfig.service?.port, 443);
    }
    // The Service exists and sends 443 to the admission pods' HTTPS listener.
    const svc = ofKind(manifests, "Service").find(
      (s) => s.apiVersion === "v1" && s.metadata.name === service,
    );
    assert.ok(svc, `Service ${service}`);
    const admission = ksvcOfFunction("admission");
    assert.deepEqual(field(svc, "spec.selector"), { "serving.knative.dev/service": admission.metadata.name });
    const port = (field(svc, "spec.ports") as { port: number; targetPort: number }[]).find(
      (p) => p.port === 443,
    );
    assert.ok(port, "port 443");
    const tls = containersOf(admission).filter((c) => envOf(c).get("TLS_CERT_FILE"));
    assert.equal(tls.length, 1, "one HTTPS container in the admission pod");
    const tlsContainer = tls[0] as (typeof tls)[number];
    const env = envOf(tlsContainer);
    assert.equal(env.get("FUNCTION"), "admission");
    assert.equal(Number(env.get("PORT")), port.targetPort);
    assert.ok((tlsContainer.ports ?? []).length === 0, "Knative allows a port on the serving container only");
    // Certificate and key come from the Secret certs writes: <service>-tls.
    const mount = (tlsContainer.volumeMounts ?? []).find((m) =>
      env.get("TLS_CERT_FILE")?.startsWith(`${m.mountPath}/`),
    );
    assert.ok(mount, "TLS_CERT_FILE is on a mounted volume");
    assert.ok(env.get("TLS_KEY_FILE")?.startsWith(`${mount.mountPath}/`));
    const volumes = field(admission, "spec.template.spec.volumes") as {
      name: string;
      secret?: { secretName: string };
    }[];
    const volume = volumes.find((v) => v.name === mount.name);
    assert.equal(volume?.secret?.secretName, `${service}-tls`);
    // Same configuration as the serving container, apart from port and TLS.
    const serving = envOf(servingContainer(admission));
    for (const [key, value] of serving) assert.equal(env.get(key), value, `webhook-tls ${key}`);
  });
});

describe("image", () => {
  const dockerfile = readFileSync(join(DEPLOY, "Dockerfile"), "utf8");
  const dockerignore = readFileSync(join(REPO, ".dockerignore"), "utf8");

  it("runs the bundles of build:functions on Node 24 as a non-root user, with the benches' NODE_OPTIONS and MALLOC_ARENA_MAX", () => {
    assert.match(dockerfile, /^ARG NODE_IMAGE=node:24[-\w.]*$/m);
    // The code caches are the next step's (the ship test below), so the build writes none.
    assert.match(
      dockerfile,
      /^RUN node scripts\/build-functions\.ts --out \/app\/dist\/functions --no-code-cache$/m,
    );
    assert.match(dockerfile, /^COPY --from=build \/app\/dist\/functions \.\/dist\/functions$/m);
    assert.match(dockerfile, new RegExp(`^ENTRYPOINT \\["node", "dist/functions/${SERVE_BUNDLE}"\\]$`, "m"));
    assert.match(dockerfile, /^USER 1000:1000$/m);
    for (const dir of ["functions", "shared", "scripts"])
      assert.match(dockerfile, new RegExp(`^COPY ${dir} \\./${dir}$`, "m"));
    assert.ok(
      dockerfile.includes(`NODE_OPTIONS="${FUNCTION_NODE_OPTIONS}"`),
      "the image's heap flags are functions/node-options.ts",
    );
    // The image's environment is functions/node-options.ts's, variable for variable.
    for (const [name, value] of Object.entries(FUNCTION_PROCESS_ENV)) {
      if (name === "NODE_OPTIONS") continue;
      assert.match(dockerfile, new RegExp(`^\\s+${name}=${value}( \\\\)?$`, "m"), name);
    }
  });

  it("ships each bundle's code cache, written in the build stage with the final stage's node and NODE_OPTIONS", () => {
    const [build = "", final = ""] = dockerfile.split(/^FROM \$\{NODE_IMAGE\}$/m).slice(-2);
    const bundles = build.indexOf("RUN node scripts/build-functions.ts --out /app/dist/functions");
    const prime = build.indexOf("RUN node scripts/prime-code-cache.ts /app/dist/functions");
    assert.ok(bundles > 0 && prime > bundles, "written in the build stage, after the bundles");
    // Both stages start from the same image, so the node binary that wrote the caches runs them.
    assert.equal(dockerfile.match(/^FROM \$\{NODE_IMAGE\}( AS build)?$/gm)?.length, 2);
    // The caches sit beside the bundles and come with them.
    assert.match(final, /^COPY --from=build \/app\/dist\/functions \.\/dist\/functions$/m);
    // V8 rejects a cache made with other flags: the script gives each bundle node-options.ts's
    // NODE_OPTIONS (checked where it runs), and the final stage sets the same (the test above).
    assert.doesNotMatch(dockerfile, /NODE_COMPILE_CACHE/, "Node's own compile cache is not used");
  });

  it("the build context is only what the image needs", () => {
    const lines = dockerignore
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith("#"));
    assert.equal(lines[0], "*", "everything excluded first");
    assert.deepEqual(lines.filter((l) => l.startsWith("!")).sort(), [
      "!functions/",
      "!package-lock.json",
      "!package.json",
      "!scripts/build-functions.ts",
      "!scripts/build-lambda.ts",
      "!scripts/bundle-shims/",
      "!scripts/prime-code-cache.ts",
      "!shared/",
    ]);
    // Every script the build runs is in the context.
    for (const [, script] of dockerfile.matchAll(/^RUN node (scripts\/\S+)/gm))
      assert.ok(lines.includes(`!${script}`), `${script} is in the build context`);
  });

  it("every file the bundles are built from is in the build context", async () => {
    const allowed = dockerignore
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l.startsWith("!"))
      .map((l) => l.slice(1));
    const inContext = (path: string) =>
      allowed.some((a) => (a.endsWith("/") ? path.startsWith(a) : path === a));
    const outDir = await mkdtemp(join(tmpdir(), "ksf-context-"));
    try {
      const built = await buildFunctions({ outDir });
      await stopEsbuild();
      const inputs = new Set(built.flatMap((b) => Object.keys(b.metafile.inputs)));
      // "namespace:name" inputs are made by a plugin (builtinsThroughRequire), not read from a file.
      const own = [...inputs].filter((p) => !p.startsWith("node_modules/") && !/^[a-z-]+:/.test(p));
      assert.ok(
        own.some((p) => p.startsWith("scripts/")),
        "the check sees files outside functions/ and shared/",
      );
      for (const path of own) assert.ok(inContext(path), `${path} is in the image's build context`);
    } finally {
      await rm(outDir, { recursive: true, force: true });
    }
  });

  it("nothing the image runs imports from outside functions/ and shared/", () => {
    for (const name of FUNCTION_NAMES) {
      const main = readFileSync(join(REPO, "functions", name, "main.ts"), "utf8");
      assert.doesNotMatch(main, /from "\.\.\/\.\.\/(sandbox|test|scripts)\//, name);
    }
  });
});
