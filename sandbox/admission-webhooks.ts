// The webhook configurations `npm start` and the benches register with the
// sandbox API server: the admission function over HTTPS (its CA as
// caBundle), mutating claims and PVs at creation and validating claim
// updates and VolumeAttachment creation, as deploy/webhooks.yaml does in a
// cluster. failurePolicy Ignore: the sandbox is a demo, and a webhook hiccup
// should not block it (the API server's own rules still apply).
import type { Registry } from "./apiserver/registry.ts";

function webhook(
  name: string,
  url: string,
  caBundle: string,
  group: string,
  resource: string,
  operations: string[],
) {
  return {
    name,
    clientConfig: { url, caBundle },
    rules: [{ operations, apiGroups: [group], apiVersions: ["v1"], resources: [resource] }],
    sideEffects: "None",
    admissionReviewVersions: ["v1"],
    failurePolicy: "Ignore",
    timeoutSeconds: 5,
  };
}

/** Seeds the Mutating- and ValidatingWebhookConfiguration for the admission function at `url`. */
export function registerAdmissionWebhooks(registry: Registry, url: string, caCertPem: string): void {
  const ca = Buffer.from(caCertPem).toString("base64");
  registry.seed({
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingWebhookConfiguration",
    metadata: { name: "kube-storage-functions" },
    webhooks: [
      webhook(
        "pvc.mutate.storage.kube-storage-functions.io",
        `${url}/mutate/persistentvolumeclaims`,
        ca,
        "",
        "persistentvolumeclaims",
        ["CREATE"],
      ),
      webhook(
        "pv.mutate.storage.kube-storage-functions.io",
        `${url}/mutate/persistentvolumes`,
        ca,
        "",
        "persistentvolumes",
        ["CREATE"],
      ),
    ],
  });
  registry.seed({
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingWebhookConfiguration",
    metadata: { name: "kube-storage-functions" },
    webhooks: [
      webhook(
        "pvc.validate.storage.kube-storage-functions.io",
        `${url}/validate/persistentvolumeclaims`,
        ca,
        "",
        "persistentvolumeclaims",
        ["UPDATE"],
      ),
      webhook(
        "va.validate.storage.kube-storage-functions.io",
        `${url}/validate/volumeattachments`,
        ca,
        "storage.k8s.io",
        "volumeattachments",
        ["CREATE"],
      ),
    ],
  });
}
