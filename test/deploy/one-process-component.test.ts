// deploy/components/one-process against the separate controllers it replaces:
// one Knative Service (FUNCTION=controllers), one ApiServerSource and one
// PingSource, whose ServiceAccount holds exactly the union of the separate
// controllers' grants, whose source watches exactly the union of their kinds,
// and which accepts events from exactly its two sources. Also with
// components/secrets before it and components/managed after it, and, where
// kubectl is installed, as `kubectl kustomize` renders the same combinations.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { controllersFromEnv, HOSTABLE } from "../../functions/controllers/main.ts";
import { CONTROLLERS_NODE_OPTIONS } from "../../functions/node-options.ts";
import { SERVED_NAMES } from "../../functions/serve.ts";
import { WATCHABLE_KINDS } from "../../shared/forwarder/watched-kinds.ts";
import { ENV_GATED, permissionKey, scanFunction } from "./code-rbac.ts";
import {
  accountGrants,
  clusterGrants,
  envOf,
  field,
  idOf,
  kubectlKustomize,
  loadManifests,
  type Manifest,
  ofKind,
  servingContainer,
} from "./manifests.ts";

const NAMESPACE = "kube-storage-functions";
const ONE_PROCESS = "components/one-process";
const SECRETS = "components/secrets";
const MANAGED = "components/managed";
const CAPACITY = "components/capacity";
const ONE_PROCESS_CAPACITY = "components/one-process-capacity";
const ONE_PROCESS_MANAGED_CAPACITY = "components/one-process-managed-capacity";
/** What the managed mode keeps of the controllers (deploy/components/managed). */
const SIDECARS = ["provisioner", "attacher", "resizer"];

const knativeServices = (objects: readonly Manifest[]): Manifest[] =>
  objects.filter((m) => m.kind === "Service" && m.apiVersion === "serving.knative.dev/v1");

function byName(objects: readonly Manifest[], kind: string, name: string): Manifest {
  const found = objects.find((m) => m.kind === kind && m.metadata.name === name);
  assert.ok(found, `${kind} ${name}`);
  return found;
}

const granted = (objects: readonly Manifest[], account: string): Set<string> =>
  clusterGrants(objects, account, NAMESPACE);

const union = (sets: Iterable<Set<string>>): string[] =>
  [...new Set([...sets].flatMap((s) => [...s]))].sort();

/** The kinds the ApiServerSources in `objects` that send to `sink` watch. */
function watchedKinds(objects: readonly Manifest[], sinks: readonly string[]): string[] {
  const kinds = ofKind(objects, "ApiServerSource")
    .filter((s) => sinks.includes(String(field(s, "spec.sink.ref.name"))))
    .flatMap((s) =>
      ((field(s, "spec.resources") ?? []) as { apiVersion: string; kind: string }[]).map(
        (r) => `${r.apiVersion}/${r.kind}`,
      ),
    );
  return [...new Set(kinds)].sort();
}

/** The kinds the one process's source lists, each of which it may list once only. */
function controllersSourceKinds(objects: readonly Manifest[]): string[] {
  const kinds = (
    (field(byName(objects, "ApiServerSource", "controllers-events"), "spec.resources") ?? []) as {
      apiVersion: string;
      kind: string;
    }[]
  ).map((r) => `${r.apiVersion}/${r.kind}`);
  assert.equal(new Set(kinds).size, kinds.length, "no kind forwarded twice");
  return kinds;
}

/** The event sources' ServiceAccount may watch each of `kinds` ("group/version/Kind" or "v1/Kind"). */
function assertSourcesMayWatch(objects: readonly Manifest[], kinds: readonly string[]): void {
  const sourcesRole = granted(objects, "event-sources");
  for (const kind of kinds) {
    const name = kind.split("/").pop();
    const plural = WATCHABLE_KINDS.get(name ?? "")?.plural;
    assert.ok(plural, `a kind the forwarder can watch: ${name}`);
    assert.ok(
      [...sourcesRole].some((p) => p.endsWith(`/${plural}:watch`)),
      `event-sources may watch ${plural}`,
    );
  }
}

function render(components: string[]): { objects: Manifest[]; unmatched: string[] } {
  const unmatched: string[] = [];
  return { objects: loadManifests(components, { unmatched }), unmatched };
}

const base = loadManifests();
const separate = knativeServices(base)
  .map((m) => m.metadata.name)
  .filter((n) => n !== "admission");

describe("one process for the controllers (deploy/components/one-process)", () => {
  const { objects, unmatched } = render([ONE_PROCESS]);
  const controllers = byName(objects, "Service", "controllers");
  const env = envOf(servingContainer(controllers));

  it("replaces every controller's Service, sources and ServiceAccount with one of each, and keeps admission", () => {
    assert.deepEqual(
      [...separate].sort(),
      [...HOSTABLE].sort(),
      "the Services it replaces are the hostable controllers",
    );
    assert.deepEqual(unmatched, []);
    assert.deepEqual(
      knativeServices(objects)
        .map((m) => m.metadata.name)
        .sort(),
      ["admission", "controllers"],
    );
    assert.deepEqual(
      ofKind(objects, "ApiServerSource").map((m) => m.metadata.name),
      ["controllers-events"],
    );
    assert.deepEqual(
      ofKind(objects, "PingSource").map((m) => m.metadata.name),
      ["controllers-resync"],
    );
    assert.deepEqual(
      ofKind(objects, "ServiceAccount")
        .map((m) => m.metadata.name)
        .sort(),
      ["admission", "controllers", "event-sources"],
    );
    // Every other object of deploy/ is still there: roles, webhooks, the namespace.
    const gone = new Set(objects.map(idOf));
    const kept = base.filter(
      (m) => !separate.some((f) => [f, `${f}-events`, `${f}-resync`].includes(m.metadata.name)),
    );
    for (const m of kept) assert.ok(gone.has(idOf(m)), `${idOf(m)} is kept`);
    assert.equal(byName(objects, "ServiceAccount", "controllers").metadata.namespace, NAMESPACE);
  });

  it("hosts every controller function, with the separate Services' settings", () => {
    assert.equal(env.get("FUNCTION"), "controllers");
    assert.ok((SERVED_NAMES as readonly string[]).includes("controllers"));
    assert.deepEqual(controllersFromEnv({ CONTROLLERS: env.get("CONTROLLERS") }), [...HOSTABLE]);
    assert.equal(field(controllers, "spec.template.spec.serviceAccountName"), "controllers");
    assert.equal(env.get("NODE_OPTIONS"), CONTROLLERS_NODE_OPTIONS, "the heap the benches measured it with");
    // Settings a replaced Service sets are set the same, but for its identity and
    // the resizer's defaults spelled out, which in one process would bind every controller.
    const own = new Set([
      "FUNCTION",
      "AUTH_TOKEN_AUDIENCES",
      "AUTH_ALLOWED_USERS",
      "CSI_TIMEOUT_SECONDS",
      "WORKERS",
    ]);
    for (const name of separate)
      for (const [key, value] of envOf(servingContainer(byName(base, "Service", name))))
        if (!own.has(key)) assert.equal(env.get(key), value, `${name}'s ${key}`);
    const provisioner = servingContainer(byName(base, "Service", "provisioner"));
    assert.deepEqual(servingContainer(controllers).securityContext, provisioner.securityContext);
    assert.deepEqual(servingContainer(controllers).readinessProbe, provisioner.readinessProbe);
  });

  it("grants its ServiceAccount exactly the union of the separate controllers' ClusterRoles", () => {
    const want = union(separate.map((f) => granted(base, f)));
    assert.deepEqual([...granted(objects, "controllers")].sort(), want);
    for (const b of ofKind(objects, "ClusterRoleBinding"))
      for (const s of (field(b, "subjects") ?? []) as { name: string }[])
        assert.ok(
          ["admission", "event-sources", "controllers"].includes(s.name),
          `${b.metadata.name} binds ${s.name}`,
        );
  });

  /** The API calls of the controllers function's code that `objects` do not grant to its ServiceAccount. */
  function ungranted(from: readonly Manifest[]): string[] {
    const have = granted(from, "controllers");
    const calls = scanFunction("controllers").calls.filter((call) => {
      const gate = ENV_GATED.find((g) => g.file === call.file);
      return (
        gate === undefined ||
        (gate.value === undefined ? Boolean(env.get(gate.env)) : env.get(gate.env) === gate.value)
      );
    });
    assert.ok(calls.length > 20, "the scan sees the hosted controllers' calls");
    return [...new Set(calls.map(permissionKey).filter((key) => !have.has(key)))];
  }

  it("is granted every API call the controllers function's code makes (Secrets with components/secrets)", () => {
    // As for the separate functions, reading a driver's Secrets is opt-in.
    assert.deepEqual(ungranted(objects), ["core/secrets:get"]);
    assert.deepEqual(ungranted(loadManifests([SECRETS, ONE_PROCESS])), []);
    assert.ok(granted(objects, "controllers").has("authentication.k8s.io/tokenreviews:create"));
  });

  it("watches the union of the replaced sources' kinds, with what the event sources may read", () => {
    assert.deepEqual(watchedKinds(objects, ["controllers"]), watchedKinds(base, separate));
    assertSourcesMayWatch(objects, watchedKinds(objects, ["controllers"]));
  });

  it("accepts events only from its two sources, for its own audience", () => {
    const audience = `serving.knative.dev/service/${NAMESPACE}/controllers`;
    assert.equal(env.get("AUTH_MODE"), "tokenreview");
    assert.equal(env.get("AUTH_TOKEN_AUDIENCES"), audience);
    for (const source of [...ofKind(objects, "ApiServerSource"), ...ofKind(objects, "PingSource")]) {
      assert.equal(field(source, "spec.sink.ref.name"), "controllers");
      assert.equal(field(source, "spec.sink.audience"), audience);
    }
    assert.equal(field(byName(objects, "PingSource", "controllers-resync"), "spec.sink.uri"), "/resync");
    assert.deepEqual(env.get("AUTH_ALLOWED_USERS")?.split(/\s+/).sort(), [
      `system:serviceaccount:${NAMESPACE}:controllers-events-oidc-sources.knative.dev-apiserversource`,
      `system:serviceaccount:${NAMESPACE}:controllers-resync-oidc-sources.knative.dev-pingsource`,
    ]);
  });

  it("after components/secrets, moves the Secret grants to the one ServiceAccount", () => {
    const withSecrets = loadManifests([SECRETS]);
    const combined = render([SECRETS, ONE_PROCESS]);
    assert.deepEqual(combined.unmatched, []);
    const want = union(separate.map((f) => granted(withSecrets, f)));
    assert.ok(want.includes("core/secrets:get"));
    assert.deepEqual([...granted(combined.objects, "controllers")].sort(), want);
  });

  it("before components/managed, hosts only the sidecars' three and watches only their kinds", () => {
    const managedAlone = loadManifests([MANAGED], { unmatched: [] });
    const { objects: both, unmatched: skipped } = render([SECRETS, ONE_PROCESS, MANAGED]);
    // managed's deletes of the separate controllers' objects find them gone already.
    assert.ok(skipped.length > 0 && skipped.every((w) => w.startsWith(`deploy/${MANAGED}:`)));
    assert.deepEqual(
      knativeServices(both)
        .map((m) => m.metadata.name)
        .sort(),
      ["admission", "controllers"],
    );
    const hosted = controllersFromEnv({
      CONTROLLERS: envOf(servingContainer(byName(both, "Service", "controllers"))).get("CONTROLLERS"),
    });
    assert.deepEqual(hosted, SIDECARS);
    assert.deepEqual(watchedKinds(both, ["controllers"]), watchedKinds(managedAlone, SIDECARS));
    const withSecretsManaged = loadManifests([SECRETS, MANAGED], { unmatched: [] });
    assert.deepEqual(
      [...granted(both, "controllers")].sort(),
      union(SIDECARS.map((f) => granted(withSecretsManaged, f))),
    );
  });

  it("kubectl kustomize, where installed, renders the same objects, grants and kinds", () => {
    for (const components of [
      [ONE_PROCESS],
      [SECRETS, ONE_PROCESS, MANAGED],
      [CAPACITY, ONE_PROCESS, ONE_PROCESS_CAPACITY],
      [CAPACITY, ONE_PROCESS, MANAGED, ONE_PROCESS_MANAGED_CAPACITY],
    ]) {
      const rendered = kubectlKustomize(components);
      // kubectl is optional for the test suite; the reader above is the check that always runs.
      if (rendered === undefined) return;
      const ours = render(components).objects;
      assert.deepEqual(rendered.map(idOf).sort(), ours.map(idOf).sort(), components.join(" + "));
      assert.deepEqual(
        [...granted(rendered, "controllers")].sort(),
        [...granted(ours, "controllers")].sort(),
      );
      assert.deepEqual(watchedKinds(rendered, ["controllers"]), watchedKinds(ours, ["controllers"]));
      const theirs = byName(rendered, "Service", "controllers");
      assert.deepEqual(
        envOf(servingContainer(theirs)),
        envOf(servingContainer(byName(ours, "Service", "controllers"))),
      );
    }
  });
});

describe("capacity tracking in the one process (deploy/components/one-process-capacity)", () => {
  const withCapacity = loadManifests([CAPACITY]);
  const { objects, unmatched } = render([CAPACITY, ONE_PROCESS, ONE_PROCESS_CAPACITY]);
  const env = envOf(servingContainer(byName(objects, "Service", "controllers")));

  it("gives the one process components/capacity's settings and kinds", () => {
    assert.deepEqual(unmatched, []);
    const provisioner = envOf(servingContainer(byName(withCapacity, "Service", "provisioner")));
    assert.equal(env.get("ENABLE_CAPACITY"), "true");
    for (const key of ["ENABLE_CAPACITY", "NAMESPACE"]) assert.equal(env.get(key), provisioner.get(key), key);
    const capacityKinds = watchedKinds(withCapacity, ["provisioner"]).filter(
      (k) => !watchedKinds(base, ["provisioner"]).includes(k),
    );
    assert.ok(capacityKinds.length >= 4, capacityKinds.join(", "));
    const kinds = controllersSourceKinds(objects);
    assert.deepEqual(
      [...kinds].sort(),
      [...new Set([...watchedKinds(base, separate), ...capacityKinds])].sort(),
    );
  });

  it("binds the provisioner's CSIStorageCapacity Role to the one ServiceAccount: every capacity call is granted", () => {
    const accounts = new Set(ofKind(objects, "ServiceAccount").map((m) => m.metadata.name));
    for (const b of [...ofKind(objects, "ClusterRoleBinding"), ...ofKind(objects, "RoleBinding")])
      for (const s of (field(b, "subjects") ?? []) as { name: string }[])
        assert.ok(accounts.has(s.name), `${b.metadata.name} binds ${s.name}, which is not installed`);
    const { cluster, namespaced } = accountGrants(objects, "controllers", NAMESPACE);
    const have = new Set([...cluster, ...namespaced]);
    const capacityCalls = scanFunction("controllers").calls.filter((call) =>
      ENV_GATED.some((g) => g.file === call.file && g.env === "ENABLE_CAPACITY"),
    );
    assert.ok(capacityCalls.length > 0, "the scan sees the capacity controller's calls");
    assert.deepEqual([...new Set(capacityCalls.map(permissionKey).filter((k) => !have.has(k)))], []);
  });
});

describe("capacity tracking in the one process of a managed cluster (deploy/components/one-process-managed-capacity)", () => {
  const separateManaged = loadManifests([CAPACITY, MANAGED], { unmatched: [] });
  const { objects } = render([CAPACITY, ONE_PROCESS, MANAGED, ONE_PROCESS_MANAGED_CAPACITY]);
  const env = envOf(servingContainer(byName(objects, "Service", "controllers")));

  it("hosts the sidecars' three with the capacity settings of the separate provisioner", () => {
    assert.deepEqual(controllersFromEnv({ CONTROLLERS: env.get("CONTROLLERS") }), SIDECARS);
    const provisioner = envOf(servingContainer(byName(separateManaged, "Service", "provisioner")));
    assert.equal(env.get("ENABLE_CAPACITY"), "true");
    for (const key of ["ENABLE_CAPACITY", "NAMESPACE"]) assert.equal(env.get(key), provisioner.get(key), key);
  });

  it("watches what the separate managed functions with capacity watch, Nodes included, each kind once", () => {
    const kinds = controllersSourceKinds(objects);
    assert.ok(kinds.includes("v1/Node"), kinds.join(", "));
    assert.deepEqual(watchedKinds(objects, ["controllers"]), watchedKinds(separateManaged, SIDECARS));
    assertSourcesMayWatch(objects, kinds);
    // components/one-process-capacity alone relies on attach-detach's Nodes, which managed mode takes out.
    const without = render([CAPACITY, ONE_PROCESS, MANAGED, ONE_PROCESS_CAPACITY]).objects;
    assert.ok(!watchedKinds(without, ["controllers"]).includes("v1/Node"));
  });

  it("grants the one ServiceAccount every call of the hosted controllers, capacity's included", () => {
    const { cluster, namespaced } = accountGrants(objects, "controllers", NAMESPACE);
    const have = new Set([...cluster, ...namespaced]);
    const calls = scanFunction("controllers").calls.filter(
      (call) =>
        ENV_GATED.some((g) => g.file === call.file && g.env === "ENABLE_CAPACITY") ||
        SIDECARS.some((f) => call.file.includes(`/${f}/`)),
    );
    assert.ok(calls.length > 0, "the scan sees the hosted controllers' calls");
    assert.deepEqual([...new Set(calls.map(permissionKey).filter((k) => !have.has(k)))], []);
  });
});
