// The configurations the real-cluster tools register: deploy/webhooks.yaml's,
// renamed, each hook called by URL with our CA; for a kube-apiserver without
// its storage admission plugins, with components/no-storage-admission-plugins' hooks;
// on request with components/attachment-driver-check's.
import assert from "node:assert/strict";
import { test } from "node:test";
import { admissionWebhookConfigurations } from "../../sandbox/admission-webhooks.ts";
import { webhookConfigurations } from "../../scripts/webhook-configurations.ts";
import type { KubeObject } from "../../shared/kube/types.ts";

type SandboxHook = { clientConfig: { url?: string }; rules: { operations: string[] }[] };

const CA = "Q0EgUEVN";
const at = (path: string) => ({ url: `https://127.0.0.1:8443${path}`, caBundle: CA });

test("deploy/webhooks.yaml's two configurations, renamed, every hook at url + its service path with the CA", async () => {
  const configs = await webhookConfigurations("check", "https://127.0.0.1:8443", "CA PEM");
  assert.deepEqual(
    configs.map((c) => [c.kind, c.metadata.name]),
    [
      ["MutatingWebhookConfiguration", "check"],
      ["ValidatingWebhookConfiguration", "check"],
    ],
  );
  const hooks = configs.flatMap((c) => c.webhooks.map((w) => [w.name, w.clientConfig]));
  // The validating configuration is empty by default: the opt-in components add to it.
  assert.deepEqual(hooks, [
    ["persistentvolumeclaims.mutate.storage.kube-storage-functions.io", at("/mutate/persistentvolumeclaims")],
  ]);
  // The rest of each hook (rules, failurePolicy, sideEffects) is the manifest's.
  assert.ok(configs.every((c) => c.webhooks.every((w) => "rules" in w && "sideEffects" in w)));
});

test("with the storage admission plugins off, the component's two hooks join their configurations", async () => {
  const configs = await webhookConfigurations("check", "https://127.0.0.1:8443", "CA PEM", {
    storagePluginsOff: true,
  });
  const hooks = configs.map((c) => [c.kind, c.webhooks.map((w) => [w.name, w.clientConfig])]);
  assert.deepEqual(hooks, [
    [
      "MutatingWebhookConfiguration",
      [
        [
          "persistentvolumeclaims.mutate.storage.kube-storage-functions.io",
          at("/mutate/persistentvolumeclaims"),
        ],
        ["persistentvolumes.mutate.storage.kube-storage-functions.io", at("/mutate/persistentvolumes")],
      ],
    ],
    [
      "ValidatingWebhookConfiguration",
      [
        [
          "persistentvolumeclaims.validate.storage.kube-storage-functions.io",
          at("/validate/persistentvolumeclaims"),
        ],
      ],
    ],
  ]);
  assert.ok(configs.every((c) => c.webhooks.every((w) => "rules" in w && "failurePolicy" in w)));
});

test("with the attachment driver check, the component's VolumeAttachment hook joins the validating configuration", async () => {
  const configs = await webhookConfigurations("check", "https://127.0.0.1:8443", "CA PEM", {
    storagePluginsOff: true,
    attachmentDriverCheck: true,
  });
  const validating = configs.find((c) => c.kind === "ValidatingWebhookConfiguration");
  assert.deepEqual(
    validating?.webhooks.map((w) => [w.name, w.clientConfig, w.failurePolicy]),
    [
      [
        "persistentvolumeclaims.validate.storage.kube-storage-functions.io",
        at("/validate/persistentvolumeclaims"),
        "Ignore",
      ],
      [
        "volumeattachments.validate.storage.kube-storage-functions.io",
        at("/validate/volumeattachments"),
        "Fail",
      ],
    ],
  );
});

test("the sandbox registers the paths and operations deploy/ does, with and without each component", async () => {
  for (const options of [
    {},
    { storagePluginsOff: true },
    { attachmentDriverCheck: true },
    { storagePluginsOff: true, attachmentDriverCheck: true },
  ]) {
    const shape = (configs: readonly KubeObject[]) =>
      configs
        .flatMap((c) =>
          ((c as { webhooks?: SandboxHook[] }).webhooks ?? []).map(
            (w) => `${c.kind} ${w.clientConfig.url} ${w.rules.map((r) => r.operations.join("+")).join()}`,
          ),
        )
        .sort();
    const deployed = await webhookConfigurations("check", "https://127.0.0.1:8443", "CA PEM", options);
    const sandboxed = admissionWebhookConfigurations("https://127.0.0.1:8443", "CA PEM", "Ignore", options);
    assert.deepEqual(shape(sandboxed), shape(deployed), JSON.stringify(options));
  }
});
