// The configurations the real-cluster tools register: deploy/webhooks.yaml's,
// renamed, each hook called by URL with our CA.
import assert from "node:assert/strict";
import { test } from "node:test";
import { webhookConfigurations } from "../../scripts/webhook-configurations.ts";

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
  assert.deepEqual(hooks, [
    [
      "persistentvolumeclaims.mutate.storage.kube-storage-functions.io",
      { url: "https://127.0.0.1:8443/mutate/persistentvolumeclaims", caBundle: "Q0EgUEVN" },
    ],
    [
      "persistentvolumes.mutate.storage.kube-storage-functions.io",
      { url: "https://127.0.0.1:8443/mutate/persistentvolumes", caBundle: "Q0EgUEVN" },
    ],
    [
      "persistentvolumeclaims.validate.storage.kube-storage-functions.io",
      { url: "https://127.0.0.1:8443/validate/persistentvolumeclaims", caBundle: "Q0EgUEVN" },
    ],
    [
      "volumeattachments.validate.storage.kube-storage-functions.io",
      { url: "https://127.0.0.1:8443/validate/volumeattachments", caBundle: "Q0EgUEVN" },
    ],
  ]);
  // The rest of each hook (rules, failurePolicy, sideEffects) is the manifest's.
  assert.ok(configs.every((c) => c.webhooks.every((w) => "rules" in w && "sideEffects" in w)));
});
