// deploy/components/managed (managed-cluster mode) against the full install:
// the component must leave exactly the functions that replace a driver's CSI
// sidecars (provisioner, attacher, resizer) and admission, with nothing that
// still points at what it removed. kustomize may not be installed, so the
// component's patches are applied here by a small reader that knows only the
// three patch forms the component uses and refuses anything else; when
// `kubectl kustomize` is on PATH its rendering must name the same objects.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { sidecarFunctions } from "../../sandbox/system.ts";
import {
  DEPLOY,
  field,
  idOf,
  kubectlKustomize,
  loadManifests,
  type Manifest,
  readKustomization,
} from "./manifests.ts";

const COMPONENT = "components/managed";
/** What kube-controller-manager keeps doing in managed mode. */
const REMOVED = ["binder", "attach-detach", "protection"];
/** What replaces the sidecars, plus admission. */
const KEPT = ["admission", "provisioner", "attacher", "resizer"];
const VA_HOOK = "volumeattachments.validate.storage.kube-storage-functions.io";

/** The patches of the component that aim at components/one-process's objects (absent here). */
const ONE_PROCESS_PATCHES = [
  `deploy/${COMPONENT}: patch ^controllers$`,
  `deploy/${COMPONENT}: patch ^controllers-events$`,
];

/** deploy/ with the component's patches applied, in order. */
function renderManaged(): Manifest[] {
  const component = readKustomization(COMPONENT);
  assert.equal(component.kind, "Component");
  assert.deepEqual(component.resources ?? [], [], "the component only takes away and narrows");
  for (const ref of component.patches ?? []) {
    const text = ref.path !== undefined ? readFileSync(join(DEPLOY, COMPONENT, ref.path), "utf8") : ref.patch;
    assert.equal(
      parseAllDocuments(text ?? "").length,
      1,
      `${ref.path ?? ref.target?.name}: one document per patch (kustomize 5.5 crashes on several deletes)`,
    );
  }
  // kustomize accepts a target that matches nothing; only the one-process patches may, here.
  const unmatched: string[] = [];
  const objects = loadManifests([COMPONENT], { unmatched });
  assert.deepEqual(unmatched, ONE_PROCESS_PATCHES);
  return objects;
}

const base = loadManifests();
const managed = renderManaged();
const names = (kind: string, apiVersion: string): string[] =>
  managed
    .filter((m) => m.kind === kind && m.apiVersion === apiVersion)
    .map((m) => m.metadata.name)
    .sort();

/** Whether a base object belongs to one of the removed functions. */
function ofRemoved(m: Manifest): boolean {
  const n = m.metadata.name;
  return REMOVED.some(
    (f) =>
      n === f ||
      n === `kube-storage-functions:${f}` ||
      ((m.kind === "ApiServerSource" || m.kind === "PingSource") &&
        (n === `${f}-events` || n === `${f}-resync`)),
  );
}

describe("managed-cluster mode (deploy/components/managed)", () => {
  it("renders to deploy/ minus binder, attach-detach and protection, whole, and nothing else missing", () => {
    const expected = base.filter((m) => !ofRemoved(m)).map(idOf);
    assert.deepEqual(managed.map(idOf).sort(), expected.sort());
    // Six objects per removed function: Knative Service, two sources, ServiceAccount, ClusterRole, binding.
    assert.equal(base.length - managed.length, REMOVED.length * 6);
    assert.deepEqual(names("Service", "serving.knative.dev/v1"), [...KEPT].sort());
    assert.deepEqual(names("ApiServerSource", "sources.knative.dev/v1"), [
      "attacher-events",
      "provisioner-events",
      "resizer-events",
    ]);
    assert.deepEqual(names("PingSource", "sources.knative.dev/v1"), [
      "attacher-resync",
      "provisioner-resync",
      "resizer-resync",
    ]);
    assert.deepEqual(names("ServiceAccount", "v1"), [...KEPT, "event-sources"].sort());
    const roles = [...KEPT, "event-sources"].map((f) => `kube-storage-functions:${f}`).sort();
    assert.deepEqual(names("ClusterRole", "rbac.authorization.k8s.io/v1"), roles);
    assert.deepEqual(names("ClusterRoleBinding", "rbac.authorization.k8s.io/v1"), roles);
  });

  it("runs the functions the sandbox runs in managed mode (sandbox/system.ts sidecarFunctions)", () => {
    assert.deepEqual([...sidecarFunctions].sort(), names("Service", "serving.knative.dev/v1"));
  });

  it("leaves nothing pointing at a removed function: sinks, bindings, allowed users", () => {
    const services = new Set(names("Service", "serving.knative.dev/v1"));
    const accounts = new Set(names("ServiceAccount", "v1"));
    for (const m of managed) {
      const sink = field(m, "spec.sink.ref.name");
      if (sink !== undefined) assert.ok(services.has(String(sink)), `${m.metadata.name} sends to ${sink}`);
      if (m.kind === "ClusterRoleBinding")
        for (const s of (m.subjects ?? []) as { name: string }[])
          assert.ok(accounts.has(s.name), `${m.metadata.name} binds ${s.name}`);
    }
    const text = JSON.stringify(managed);
    for (const f of REMOVED) {
      assert.ok(!text.includes(`${f}-events-oidc`), `an allowed user of ${f}'s source is left`);
      assert.ok(!text.includes(`/kube-storage-functions/${f}"`), `an audience of ${f} is left`);
    }
  });

  it("the event sources may watch what the sources left watch, and no longer every pod", () => {
    const role = managed.find((m) => m.kind === "ClusterRole" && m.metadata.name.endsWith(":event-sources"));
    const granted = new Set<string>();
    for (const rule of (role?.rules ?? []) as { apiGroups: string[]; resources: string[]; verbs: string[] }[])
      for (const g of rule.apiGroups)
        for (const r of rule.resources)
          if (["get", "list", "watch"].every((v) => rule.verbs.includes(v))) granted.add(`${g}/${r}`);
    const plural: Record<string, string> = {
      PersistentVolumeClaim: "/persistentvolumeclaims",
      PersistentVolume: "/persistentvolumes",
      VolumeAttachment: "storage.k8s.io/volumeattachments",
      Pod: "/pods",
      Node: "/nodes",
    };
    for (const source of managed.filter((m) => m.kind === "ApiServerSource"))
      for (const r of (field(source, "spec.resources") ?? []) as { kind: string }[]) {
        const want = plural[r.kind];
        assert.ok(want && granted.has(want), `${source.metadata.name} watches ${r.kind}: not granted`);
      }
    assert.ok(granted.has("/namespaces"), "namespaceSelector is resolved against namespaces");
    assert.ok(!granted.has("/pods"), "pods were only the removed functions'");
    // Nodes stay for components/capacity, which adds them to provisioner-events.
    assert.ok(granted.has("/nodes"));
    const baseRole = base.find((m) => m.kind === "ClusterRole" && m.metadata.name.endsWith(":event-sources"));
    assert.ok(JSON.stringify(baseRole?.rules).includes('"pods"'), "the full install still grants pods");
  });

  it("keeps the default's hooks, none of which can block kube-controller-manager's writes", () => {
    const hooks = (kind: string, from: readonly Manifest[]): string[] =>
      from
        .filter((m) => m.kind === kind)
        .flatMap((m) => ((m.webhooks ?? []) as { name: string }[]).map((w) => w.name))
        .sort();
    assert.deepEqual(
      hooks("MutatingWebhookConfiguration", managed),
      hooks("MutatingWebhookConfiguration", base),
    );
    assert.deepEqual(
      hooks("ValidatingWebhookConfiguration", managed),
      hooks("ValidatingWebhookConfiguration", base),
    );
    // The Fail hook on the VolumeAttachments kube-controller-manager creates is opt-in, and not in either.
    assert.ok(!hooks("ValidatingWebhookConfiguration", managed).includes(VA_HOOK));
    // Every hook left may fail open: none can block kube-controller-manager's writes.
    for (const m of managed.filter((x) => x.kind.endsWith("WebhookConfiguration")))
      for (const w of (m.webhooks ?? []) as { name: string; failurePolicy: string }[])
        assert.equal(w.failurePolicy, "Ignore", w.name);
  });

  it("kubectl kustomize, where installed, renders the same objects and the same narrowed role and hooks", () => {
    const rendered = kubectlKustomize([COMPONENT]);
    // kubectl is optional for the test suite; the reader above is the check that always runs.
    if (rendered === undefined) {
      assert.ok(managed.length > 0);
      return;
    }
    const byId = (list: readonly Manifest[]) => new Map(list.map((m) => [idOf(m), m]));
    const ours = byId(managed);
    const theirs = byId(rendered);
    assert.deepEqual([...theirs.keys()].sort(), [...ours.keys()].sort());
    const pick = (map: Map<string, Manifest>, id: string, path: string) => field(map.get(id), path);
    const roleId = "ClusterRole.rbac.authorization.k8s.io/kube-storage-functions:event-sources";
    assert.deepEqual(pick(theirs, roleId, "rules"), pick(ours, roleId, "rules"));
    const vwc = "ValidatingWebhookConfiguration.admissionregistration.k8s.io/kube-storage-functions";
    assert.deepEqual(
      ((pick(theirs, vwc, "webhooks") ?? []) as { name: string }[]).map((w) => w.name),
      ((pick(ours, vwc, "webhooks") ?? []) as { name: string }[]).map((w) => w.name),
    );
    // The base's image and namespace still apply to what is left.
    const provisioner = theirs.get("Service.serving.knative.dev/kube-storage-functions/provisioner");
    assert.match(
      String(field(provisioner, "spec.template.spec.containers.0.image")),
      /kube-storage-functions:/,
    );
    const parsed = parseYaml(readFileSync(join(DEPLOY, "kustomization.yaml"), "utf8")) as {
      namespace: string;
    };
    assert.equal(provisioner?.metadata.namespace, parsed.namespace);
  });
});
