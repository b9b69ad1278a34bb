// deploy/rbac.yaml against the code: each function's ClusterRole grants
// exactly what its reachable code calls (code-rbac.ts reads the calls from
// the source), so a new kube call without a grant, or a grant no code uses,
// fails here instead of in a cluster.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FUNCTION_NAMES } from "../../functions/serve.ts";
import {
  ENV_GATED,
  type KubeCall,
  permissionKey,
  reachableChunks,
  scanFiles,
  scanFunction,
} from "./code-rbac.ts";
import {
  clusterGrants,
  envOf,
  field,
  loadManifests,
  type Manifest,
  ofKind,
  readKustomization,
  servingContainer,
} from "./manifests.ts";

const NAMESPACE = "kube-storage-functions";
const manifests = loadManifests();
const ksvcs = ofKind(manifests, "Service").filter((m) => m.apiVersion === "serving.knative.dev/v1");
/** The component that adds cluster-wide `get secrets` (deploy/components/secrets). */
const SECRETS_COMPONENT = "components/secrets";
const withSecrets = loadManifests([SECRETS_COMPONENT]);
/** Granted only by the secrets component: the default install reads no Secret outside its namespace. */
const SECRETS_GET = "core/secrets:get";

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

/** Every (group, resource, verb) the ClusterRoles bound to a ServiceAccount grant, in `objects` (default: the default install). */
function granted(account: string, objects: readonly Manifest[] = manifests): Set<string> {
  return clusterGrants(objects, account, NAMESPACE);
}

function ksvcOf(name: string): Manifest {
  const ksvc = ksvcs.find((k) => k.metadata.name === name);
  assert.ok(ksvc, `Knative Service ${name}`);
  return ksvc;
}

/** The calls a function's deployment needs: all but those behind a feature its environment leaves off. */
function needed(name: string): { needed: Map<string, KubeCall[]>; gatedOff: string[] } {
  const env = new Map<string, string>();
  // Every container of the pod runs under the same ServiceAccount.
  for (const c of (field(ksvcOf(name), "spec.template.spec.containers") ?? []) as Parameters<
    typeof envOf
  >[0][])
    for (const [k, v] of envOf(c)) if (!env.has(k) || v) env.set(k, v);
  const result = new Map<string, KubeCall[]>();
  const gatedOff: string[] = [];
  for (const call of scanFunction(name).calls) {
    const gate = ENV_GATED.find((g) => g.file === call.file);
    const on =
      gate === undefined ||
      (gate.value === undefined
        ? Boolean(env.get(gate.env))
        : env.get(gate.env)?.toLowerCase() === gate.value);
    const key = permissionKey(call);
    if (!on) {
      gatedOff.push(key);
      continue;
    }
    result.set(key, [...(result.get(key) ?? []), call]);
  }
  return { needed: result, gatedOff };
}

describe("code scan", () => {
  it("resolves every API call to a resource descriptor", () => {
    for (const name of FUNCTION_NAMES) {
      const { unresolved } = scanFunction(name);
      assert.deepEqual(unresolved, [], `${name}: calls whose resource the scan cannot tell`);
    }
  });

  it("sees the calls it is meant to see (a scan that finds nothing would pass everything)", () => {
    const binder = new Set(scanFunction("binder").calls.map(permissionKey));
    for (const key of [
      "core/persistentvolumes/status:update",
      "core/persistentvolumeclaims:update",
      "core/events:create",
    ])
      assert.ok(binder.has(key), `binder: ${key}`);
    const attacher = new Set(scanFunction("attacher").calls.map(permissionKey));
    // updateObject(kube, volumeAttachments, …, { subresource: "status" }): a read, then a status write.
    assert.ok(attacher.has("storage.k8s.io/volumeattachments/status:update"));
    assert.ok(attacher.has("storage.k8s.io/volumeattachments:get"));
    // Only the secret reader of the provisioner's module, not its topology or snapshot reads.
    assert.ok(attacher.has("core/secrets:get"));
    assert.ok(!attacher.has("core/nodes:list"), "attacher reaches only readSecretData in load-request.ts");
    // The resizer's merge patches of the claim's status, its class read and its in-use check.
    const resizer = new Set(scanFunction("resizer").calls.map(permissionKey));
    for (const key of [
      "core/persistentvolumeclaims/status:patch",
      "core/persistentvolumes:patch",
      "storage.k8s.io/volumeattributesclasses:get",
      "core/pods:list",
      "core/secrets:get",
    ])
      assert.ok(resizer.has(key), `resizer: ${key}`);
    const synthetic = scanFiles(["shared/provisioner/runtime/source-protection.ts"]);
    assert.ok(
      synthetic.calls.some((c) => permissionKey(c) === "snapshot.storage.k8s.io/volumesnapshots:update"),
    );
  });

  it("no function reaches the typed client-node APIs, which this scan does not read", () => {
    for (const name of FUNCTION_NAMES) {
      const typed = reachableChunks(`functions/${name}/main.ts`).filter(({ chunk }) =>
        /\b(makeApiClient|createKubeClients)\s*\(/.test(chunk.text),
      );
      assert.deepEqual(
        typed.map(({ module, chunk }) => `${module.file}: ${chunk.name ?? "top level"}`),
        [],
        `${name}: API calls outside KubeJsonClient`,
      );
    }
  });
});

describe("ClusterRoles", () => {
  for (const name of FUNCTION_NAMES) {
    it(`${name}: grants exactly what its code calls (secrets with the secrets component only)`, () => {
      const account = field(ksvcOf(name), "spec.template.spec.serviceAccountName") as string;
      const have = granted(account, withSecrets);
      const { needed: need } = needed(name);
      const missing = [...need.keys()].filter((k) => !have.has(k));
      assert.deepEqual(
        missing.map(
          (k) =>
            `${k} (${need
              .get(k)
              ?.map((c) => `${c.file}:${c.line}`)
              .join(", ")})`,
        ),
        [],
        `${name}: calls its ClusterRole does not allow`,
      );
      const extra = [...have].filter((k) => !need.has(k));
      assert.deepEqual(extra, [], `${name}: grants no code of it uses`);
    });
  }

  it("grants nothing by wildcard, by resource name or on non-resource URLs, and watch only for the watched copies", () => {
    for (const role of ofKind(withSecrets, "ClusterRole")) {
      for (const rule of (field(role, "rules") ?? []) as Rule[]) {
        for (const list of [rule.apiGroups, rule.resources, rule.verbs])
          assert.ok(!(list ?? []).includes("*"), role.metadata.name);
        assert.equal(rule.resourceNames, undefined);
        assert.equal(rule.nonResourceURLs, undefined);
      }
    }
    // Functions are handed their events; the watches are the binder's copies of the PVs and claims
    // (read as upstream reads its informers, never "gone" from a copy), the provisioner's copies of
    // the Nodes and CSINodes (topology) and of the VolumeAttachments (a deletion's "still attached"
    // check), the attacher's of the CSINodes (node IDs) and PVs (an attach's volume), and the
    // binder's, provisioner's and admission's copy of the StorageClasses (whose specs cannot change).
    const allowedWatches: Record<string, string[]> = {
      admission: ["storage.k8s.io/storageclasses:watch"],
      binder: [
        "core/persistentvolumeclaims:watch",
        "core/persistentvolumes:watch",
        "storage.k8s.io/storageclasses:watch",
      ],
      attacher: ["core/persistentvolumes:watch", "storage.k8s.io/csinodes:watch"],
      provisioner: [
        "core/nodes:watch",
        "storage.k8s.io/csinodes:watch",
        "storage.k8s.io/storageclasses:watch",
        "storage.k8s.io/volumeattachments:watch",
      ],
    };
    for (const name of FUNCTION_NAMES) {
      const account = field(ksvcOf(name), "spec.template.spec.serviceAccountName") as string;
      assert.deepEqual(
        [...granted(account)].filter((k) => k.endsWith(":watch")).sort(),
        allowedWatches[name] ?? [],
        `${name} is handed events; it watches nothing else`,
      );
    }
  });

  it("feature-gated calls are granted only when the Service turns the feature on", () => {
    for (const name of FUNCTION_NAMES) {
      const account = field(ksvcOf(name), "spec.template.spec.serviceAccountName") as string;
      const have = granted(account);
      const { needed: need, gatedOff } = needed(name);
      for (const key of gatedOff)
        if (!need.has(key)) assert.ok(!have.has(key), `${name}: ${key} is granted but its feature is off`);
    }
    // TokenReviews exactly for the Services that set AUTH_MODE=tokenreview (the loop above and the
    // exact-grant test hold either way; this names the outcome so a silent flip shows up here).
    const reviewKey = "authentication.k8s.io/tokenreviews:create";
    for (const name of FUNCTION_NAMES) {
      const account = field(ksvcOf(name), "spec.template.spec.serviceAccountName") as string;
      const mode = envOf(servingContainer(ksvcOf(name)))
        .get("AUTH_MODE")
        ?.toLowerCase();
      assert.equal(
        granted(account).has(reviewKey),
        mode === "tokenreview" && scanFunction(name).calls.some((c) => permissionKey(c) === reviewKey),
        `${name}: AUTH_MODE=${mode ?? "unset"} and the tokenreviews grant go together`,
      );
    }
    // The shipped webhook leaves TLS_SECRET_NAME unset: it mounts its certificate Secret.
    assert.ok(!granted("admission").has("core/secrets:get"), "the webhook mounts its certificate Secret");
  });

  it("every ServiceAccount a Knative Service or source names exists and is bound", () => {
    const accounts = new Set(ofKind(manifests, "ServiceAccount").map((s) => s.metadata.name));
    const named = [
      ...ksvcs.map((k) => field(k, "spec.template.spec.serviceAccountName")),
      ...ofKind(manifests, "ApiServerSource").map((s) => field(s, "spec.serviceAccountName")),
    ] as string[];
    for (const account of named) {
      assert.ok(accounts.has(account), `ServiceAccount ${account}`);
      assert.ok(granted(account).size > 0, `${account} is bound to a ClusterRole`);
    }
    for (const ksvc of ksvcs) assert.equal(envOf(servingContainer(ksvc)).get("FUNCTION"), ksvc.metadata.name);
  });
});

describe("secrets access is opt-in (deploy/components/secrets)", () => {
  // The Service's account; a function whose Service is not written yet goes by its own name, as rbac.yaml names
  // every account (the Knative Services tests fail for the missing Service itself).
  const accountOf = (name: string): string => {
    const ksvc = ksvcs.find((k) => k.metadata.name === name);
    return ksvc ? (field(ksvc, "spec.template.spec.serviceAccountName") as string) : name;
  };
  // From the code alone (all but the TLS_SECRET_NAME read of the serving certificate), so this holds before a
  // Service exists.
  const readers = FUNCTION_NAMES.filter((name) =>
    scanFunction(name).calls.some(
      (c) => permissionKey(c) === SECRETS_GET && !ENV_GATED.some((g) => g.file === c.file),
    ),
  );
  const component = readKustomization(SECRETS_COMPONENT);
  const added = loadManifests([SECRETS_COMPONENT]).filter((m) =>
    m.file.startsWith(`deploy/${SECRETS_COMPONENT}/`),
  );

  it("the scan finds the functions that read secrets (provisioner, attacher and resizer at least)", () => {
    for (const name of ["provisioner", "attacher", "resizer"])
      assert.ok((readers as readonly string[]).includes(name), name);
  });

  it("the default install grants no function, and no account at all, get on secrets", () => {
    assert.deepEqual(
      readKustomization().components ?? [],
      [],
      "deploy/kustomization.yaml applies no component",
    );
    for (const role of ofKind(manifests, "ClusterRole"))
      for (const rule of (field(role, "rules") ?? []) as Rule[])
        assert.ok(
          !(rule.resources ?? []).includes("secrets"),
          `${role.metadata.name} (${role.file}) grants ${rule.verbs?.join(",")} on secrets`,
        );
    // Nor a namespaced Role: the shipped webhook mounts its certificate Secret.
    assert.deepEqual(ofKind(manifests, "Role"), []);
    for (const name of FUNCTION_NAMES) {
      const account = accountOf(name);
      assert.ok(!granted(account).has(SECRETS_GET), `${name} reads no secret by default`);
    }
  });

  it("is a kustomize Component of ClusterRoles and bindings that grant get on secrets and nothing else", () => {
    assert.equal(component.apiVersion, "kustomize.config.k8s.io/v1alpha1");
    assert.equal(component.kind, "Component");
    assert.deepEqual([...new Set(added.map((m) => m.kind))].sort(), ["ClusterRole", "ClusterRoleBinding"]);
    for (const role of ofKind(added, "ClusterRole"))
      assert.deepEqual(field(role, "rules"), [{ apiGroups: [""], resources: ["secrets"], verbs: ["get"] }]);
  });

  it("gives get on secrets to exactly the functions whose code reads them, one ClusterRole and binding each", () => {
    for (const name of FUNCTION_NAMES) {
      const account = accountOf(name);
      assert.equal(granted(account, withSecrets).has(SECRETS_GET), readers.includes(name), name);
    }
    const bindings = ofKind(added, "ClusterRoleBinding");
    assert.equal(bindings.length, readers.length);
    for (const name of readers) {
      const binding = bindings.find((b) => b.metadata.name === `kube-storage-functions:${name}-secrets`);
      assert.ok(binding, `a binding of its own for ${name}`);
      assert.equal(field(binding, "roleRef.name"), `kube-storage-functions:${name}-secrets`);
      assert.deepEqual(field(binding, "subjects"), [
        { kind: "ServiceAccount", name: accountOf(name), namespace: NAMESPACE },
      ]);
    }
  });
});
