// deploy/components/capacity against the code: off by default (upstream's
// --enable-capacity default), and with the component the provisioner's
// Service turns it on in a way its entry accepts, its ApiServerSource
// forwards exactly the kinds the provisioner and capacity controllers act on
// (found by driving the real controllers), and its RBAC grants exactly what
// the code then calls: CSIStorageCapacity writes by a Role in the functions'
// namespace only, everything else as deploy/rbac.yaml has it.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { capacityFromEnv } from "../../functions/provisioner/main.ts";
import { combineControllers } from "../../shared/http/combined-controller.ts";
import type { Controller, ControllerEvent } from "../../shared/http/controller-function.ts";
import { apiVersionOf } from "../../shared/kube/resources.ts";
import {
  driverNameLabel,
  managedByCentral,
  managedByLabel,
} from "../../shared/provisioner/capacity/constants.ts";
import { CapacityController } from "../../shared/provisioner/capacity/runtime/capacity-controller.ts";
import { defaultProvisionerOptions } from "../../shared/provisioner/options.ts";
import { ProvisionerController } from "../../shared/provisioner/runtime/provisioner-controller.ts";
import { descriptors, ENV_GATED, permissionKey, scanFiles, scanFunction } from "./code-rbac.ts";
import {
  accountGrants,
  envOf,
  field,
  loadManifests,
  type Manifest,
  ofKind,
  readKustomization,
  servingContainer,
} from "./manifests.ts";

const COMPONENT = "components/capacity";
const SECRETS = "components/secrets";
const NAMESPACE = readKustomization().namespace as string;
const DRIVER = "hostpath.csi.k8s.io";
const CAPACITY_FILE = "shared/provisioner/capacity/runtime/capacity-controller.ts";
const CAPACITY_RESOURCE = "storage.k8s.io/csistoragecapacities";

const base = loadManifests();
const withCapacity = loadManifests([COMPONENT]);
// Exact grants are checked with the secrets component too: the provisioner's secret read is granted there.
const full = loadManifests([SECRETS, COMPONENT]);
const added = withCapacity.filter((m) => m.file.startsWith(`deploy/${COMPONENT}/`));

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
}

interface TypeRef {
  apiVersion: string;
  kind: string;
}

function one(objects: readonly Manifest[], kind: string, name: string): Manifest {
  const found = objects.filter((m) => m.kind === kind && m.metadata.name === name);
  assert.equal(found.length, 1, `one ${kind} ${name}`);
  return found[0] as Manifest;
}

function provisionerEnv(objects: readonly Manifest[]): Map<string, string> {
  const ksvc = ofKind(objects, "Service").find(
    (m) => m.apiVersion === "serving.knative.dev/v1" && m.metadata.name === "provisioner",
  );
  assert.ok(ksvc, "Knative Service provisioner");
  return envOf(servingContainer(ksvc));
}

const grants = (objects: readonly Manifest[], account: string) => accountGrants(objects, account, NAMESPACE);

/** The provisioner's calls with the features its Service's environment turns on. */
function provisionerNeeds(objects: readonly Manifest[]): Set<string> {
  const env = provisionerEnv(objects);
  const out = new Set<string>();
  for (const call of scanFunction("provisioner").calls) {
    const gate = ENV_GATED.find((g) => g.file === call.file);
    const on =
      gate === undefined ||
      (gate.value === undefined
        ? Boolean(env.get(gate.env))
        : env.get(gate.env)?.toLowerCase() === gate.value);
    if (on) out.add(permissionKey(call));
  }
  return out;
}

/** A client, CSI client and recorder in one: records that it was reached for, then fails. */
function touchRecorder(): { client: never; touched: () => boolean } {
  let touched = false;
  const client = new Proxy(
    {},
    {
      get(_target, prop) {
        if (prop === "then") return undefined;
        return () => {
          touched = true;
          const failed = Promise.reject(new Error(`touched ${String(prop)}`));
          failed.catch(() => undefined);
          return failed;
        };
      },
    },
  );
  return { client: client as never, touched: () => touched };
}

/** The provisioner function's controller as main.ts composes it for this environment. */
function provisionerFor(env: Map<string, string>, client: never): Controller {
  const provisioner = new ProvisionerController({
    kube: client,
    csi: client,
    events: client,
    driverName: DRIVER,
    options: defaultProvisionerOptions(DRIVER),
  });
  const capacity = capacityFromEnv(Object.fromEntries(env), true);
  return capacity
    ? combineControllers(provisioner, {
        capacity: new CapacityController({ kube: client, csi: client, driverName: DRIVER, ...capacity }),
      })
    : provisioner;
}

/**
 * apiVersion/Kind of every kind one of whose add, update or delete events makes
 * the controller act: reach for a client, or (add, update) answer at once from
 * the event. The runtime answers every delete ("deleted; nothing left to do"),
 * so a delete counts only when it reaches for a client; its copy carries the
 * labels of a CSIStorageCapacity this driver manages, the one delete capacity
 * tracking acts on (it puts the object back).
 */
async function handledKinds(env: Map<string, string>): Promise<string[]> {
  const handled: string[] = [];
  for (const r of descriptors().values()) {
    let acts = false;
    for (const action of ["add", "update", "delete"] as const) {
      const probe = touchRecorder();
      const event: ControllerEvent = {
        action,
        kind: r.kind,
        apiVersion: apiVersionOf(r),
        name: "probe",
        // The functions' namespace: capacity tracking heeds only its own CSIStorageCapacity objects.
        ...(r.namespaced ? { namespace: NAMESPACE } : {}),
        ...(action === "delete"
          ? {
              object: {
                metadata: {
                  name: "probe",
                  labels: { [driverNameLabel]: DRIVER, [managedByLabel]: managedByCentral },
                },
                storageClassName: "probe",
              },
            }
          : {}),
      };
      const reports = await provisionerFor(env, probe.client)
        .handleEvent(event)
        .catch(() => undefined);
      const answered = action !== "delete" && reports !== undefined && reports.length > 0;
      if (probe.touched() || answered) acts = true;
    }
    if (acts) handled.push(`${apiVersionOf(r)}/${r.kind}`);
  }
  return handled.sort();
}

function sourceKinds(objects: readonly Manifest[]): string[] {
  return (field(one(objects, "ApiServerSource", "provisioner-events"), "spec.resources") as TypeRef[])
    .map((r) => `${r.apiVersion}/${r.kind}`)
    .sort();
}

describe("capacity tracking is off by default (deploy/components/capacity)", () => {
  it("deploy/kustomization.yaml applies no component, and the provisioner's Service sets neither variable", () => {
    assert.deepEqual(readKustomization().components ?? [], []);
    const env = provisionerEnv(base);
    assert.ok(!env.has("ENABLE_CAPACITY") && !env.has("NAMESPACE"), [...env.keys()].join(", "));
    assert.equal(capacityFromEnv(Object.fromEntries(env), true), undefined, "the entry reads it as off");
  });

  it("no account may touch CSIStorageCapacity objects, and the provisioner's source forwards claims and PVs only", async () => {
    for (const m of [...ofKind(base, "ClusterRole"), ...ofKind(base, "Role")])
      for (const rule of (field(m, "rules") ?? []) as Rule[])
        assert.ok(!(rule.resources ?? []).includes("csistoragecapacities"), m.metadata.name);
    assert.deepEqual(sourceKinds(base), ["v1/PersistentVolume", "v1/PersistentVolumeClaim"]);
    assert.deepEqual(sourceKinds(base), await handledKinds(provisionerEnv(base)));
  });
});

describe("deploy/components/capacity", () => {
  it("is a kustomize Component of RBAC objects and two JSON patches", () => {
    const k = readKustomization(COMPONENT);
    assert.equal(k.apiVersion, "kustomize.config.k8s.io/v1alpha1");
    assert.equal(k.kind, "Component");
    assert.deepEqual(added.map((m) => m.kind).sort(), [
      "ClusterRole",
      "ClusterRoleBinding",
      "Role",
      "RoleBinding",
    ]);
    assert.deepEqual(
      (k.patches ?? []).map((p) => `${p.target?.kind}/${p.target?.name}`),
      ["Service/provisioner", "ApiServerSource/provisioner-events"],
    );
    // Nothing else changes: the same objects, by kind and name, plus the component's.
    const names = (objects: readonly Manifest[]) =>
      objects.map((m) => `${m.kind}/${m.metadata.namespace ?? ""}/${m.metadata.name}`).sort();
    assert.deepEqual(names(withCapacity), [...names(base), ...names(added)].sort());
  });

  it("turns it on as the provisioner's entry reads it: ENABLE_CAPACITY=true, NAMESPACE the functions' namespace", () => {
    const env = provisionerEnv(withCapacity);
    assert.equal(env.get("ENABLE_CAPACITY"), "true");
    assert.equal(env.get("NAMESPACE"), NAMESPACE);
    assert.deepEqual(capacityFromEnv(Object.fromEntries(env), true), {
      namespace: NAMESPACE,
      forImmediateBinding: false,
    });
    // A driver without GET_CAPACITY makes the function refuse to start rather than publish nothing.
    assert.throws(() => capacityFromEnv(Object.fromEntries(env), false), /GET_CAPACITY/);
    // The patch appends: the base's settings are all still there, unchanged.
    for (const [k, v] of provisionerEnv(base)) assert.equal(env.get(k), v, k);
  });

  it("the provisioner's ApiServerSource forwards exactly the kinds its controllers then act on", async () => {
    const kinds = sourceKinds(withCapacity);
    assert.deepEqual(kinds, await handledKinds(provisionerEnv(withCapacity)));
    for (const kind of [
      "storage.k8s.io/v1/StorageClass",
      "v1/Node",
      "storage.k8s.io/v1/CSINode",
      "storage.k8s.io/v1/CSIStorageCapacity",
    ])
      assert.ok(kinds.includes(kind), kind);
  });

  it("the event sources' account may get, list and watch every kind the patched source forwards", () => {
    const source = one(withCapacity, "ApiServerSource", "provisioner-events");
    const { cluster } = grants(withCapacity, field(source, "spec.serviceAccountName") as string);
    const byKind = new Map([...descriptors().values()].map((r) => [`${apiVersionOf(r)}/${r.kind}`, r]));
    for (const kind of sourceKinds(withCapacity)) {
      const r = byKind.get(kind);
      assert.ok(r, kind);
      for (const verb of ["get", "list", "watch"])
        assert.ok(
          cluster.has(permissionKey({ group: r.group, resource: r.plural, verb })),
          `${verb} ${kind}`,
        );
    }
    // Read-only: the adapter writes nothing.
    for (const role of ofKind(added, "ClusterRole"))
      for (const rule of (field(role, "rules") ?? []) as Rule[])
        assert.deepEqual(rule.verbs, ["get", "list", "watch"], role.metadata.name);
  });

  it("the provisioner gets exactly what its code calls with capacity on; CSIStorageCapacity only in its namespace", () => {
    const need = provisionerNeeds(full);
    const { cluster, namespaced } = grants(full, "provisioner");
    const capacityCalls = [...need].filter((k) => k.startsWith(`${CAPACITY_RESOURCE}:`)).sort();
    // The scan sees the capacity controller's writes (a scan that finds nothing would pass anything).
    assert.deepEqual(capacityCalls, [
      `${CAPACITY_RESOURCE}:create`,
      `${CAPACITY_RESOURCE}:delete`,
      `${CAPACITY_RESOURCE}:list`,
      `${CAPACITY_RESOURCE}:update`,
    ]);
    assert.deepEqual(
      [...namespaced].sort(),
      capacityCalls,
      "the Role grants CSIStorageCapacity calls, no more",
    );
    assert.ok(
      ![...cluster].some((k) => k.startsWith(`${CAPACITY_RESOURCE}:`)),
      "no CSIStorageCapacity grant outside the namespace",
    );
    const others = [...need].filter((k) => !k.startsWith(`${CAPACITY_RESOURCE}:`));
    assert.deepEqual(
      others.filter((k) => !cluster.has(k)),
      [],
      "calls of the capacity controller (classes, Nodes, CSINodes) the ClusterRole does not allow",
    );
    assert.deepEqual(
      [...cluster].filter((k) => !need.has(k)),
      [],
      "cluster-wide grants no code of it uses",
    );
  });

  it("the Role's verbs are the capacity controller's own calls on CSIStorageCapacity", () => {
    const own = new Set(
      scanFiles([CAPACITY_FILE])
        .calls.filter((c) => `${c.group}/${c.resource}` === CAPACITY_RESOURCE)
        .map((c) => c.verb),
    );
    const role = one(added, "Role", "kube-storage-functions:provisioner-capacity");
    assert.equal(role.metadata.namespace, NAMESPACE);
    assert.deepEqual(field(role, "rules"), [
      {
        apiGroups: ["storage.k8s.io"],
        resources: ["csistoragecapacities"],
        verbs: [...own].sort(byVerbOrder),
      },
    ]);
    const binding = one(added, "RoleBinding", "kube-storage-functions:provisioner-capacity");
    assert.deepEqual(field(binding, "roleRef"), {
      apiGroup: "rbac.authorization.k8s.io",
      kind: "Role",
      name: "kube-storage-functions:provisioner-capacity",
    });
    assert.deepEqual(field(binding, "subjects"), [
      { kind: "ServiceAccount", name: "provisioner", namespace: NAMESPACE },
    ]);
  });

  it("the capacity calls are behind ENABLE_CAPACITY: the default install's provisioner needs none", () => {
    const need = provisionerNeeds(loadManifests([SECRETS]));
    assert.ok(![...need].some((k) => k.startsWith(`${CAPACITY_RESOURCE}:`)));
    // And what it does need is granted without the component.
    const { cluster } = grants(loadManifests([SECRETS]), "provisioner");
    assert.deepEqual(
      [...need].filter((k) => !cluster.has(k)),
      [],
    );
  });
});

/** The order deploy/components/capacity/rbac.yaml spells the verbs in: read, then write. */
function byVerbOrder(a: string, b: string): number {
  const order = ["get", "list", "watch", "create", "update", "patch", "delete"];
  return order.indexOf(a) - order.indexOf(b);
}
