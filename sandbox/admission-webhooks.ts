// The webhook configurations the admission function serves, as
// deploy/webhooks.yaml registers them in a cluster: mutating claims at
// creation; with `storagePluginsOff` also what
// deploy/components/no-storage-admission-plugins adds, mutating PVs at
// creation and validating claim updates; with `attachmentDriverCheck` what
// deploy/components/attachment-driver-check adds, validating VolumeAttachment
// creation. `npm start` and the benches seed them into the sandbox API server with
// failurePolicy Ignore (the sandbox is a demo, and a webhook hiccup should
// not block it; the API server's own rules still apply, and the sandbox
// counts each ignored failure, which the benches report); the end-to-end
// webhook test seeds them with Fail.
import type { OptInHooks } from "../scripts/webhook-configurations.ts";
import type { KubeObject } from "../shared/kube/types.ts";
import type { Registry } from "./apiserver/registry.ts";

export type FailurePolicy = "Ignore" | "Fail";

interface Hook {
  name: string;
  path: string;
  group: string;
  resource: string;
  operation: "CREATE" | "UPDATE";
  /** Registered only with this opt-in component of deploy/components. */
  component?: keyof OptInHooks;
}

const MUTATING: readonly Hook[] = [
  {
    name: "pvc.mutate.storage.kube-storage-functions.io",
    path: "/mutate/persistentvolumeclaims",
    group: "",
    resource: "persistentvolumeclaims",
    operation: "CREATE",
  },
  {
    name: "pv.mutate.storage.kube-storage-functions.io",
    path: "/mutate/persistentvolumes",
    group: "",
    resource: "persistentvolumes",
    operation: "CREATE",
    component: "storagePluginsOff",
  },
];

const VALIDATING: readonly Hook[] = [
  {
    name: "pvc.validate.storage.kube-storage-functions.io",
    path: "/validate/persistentvolumeclaims",
    group: "",
    resource: "persistentvolumeclaims",
    operation: "UPDATE",
    component: "storagePluginsOff",
  },
  {
    name: "va.validate.storage.kube-storage-functions.io",
    path: "/validate/volumeattachments",
    group: "storage.k8s.io",
    resource: "volumeattachments",
    operation: "CREATE",
    component: "attachmentDriverCheck",
  },
];

/** The Mutating- and ValidatingWebhookConfiguration for the admission function at `url` (HTTPS, its CA). */
export function admissionWebhookConfigurations(
  url: string,
  caCertPem: string,
  failurePolicy: FailurePolicy,
  options: OptInHooks = {},
): KubeObject[] {
  const caBundle = Buffer.from(caCertPem).toString("base64");
  const webhooks = (hooks: readonly Hook[]) =>
    hooks
      .filter((hook) => hook.component === undefined || options[hook.component] === true)
      .map((hook) => ({
        name: hook.name,
        clientConfig: { url: `${url}${hook.path}`, caBundle },
        rules: [
          {
            operations: [hook.operation],
            apiGroups: [hook.group],
            apiVersions: ["v1"],
            resources: [hook.resource],
          },
        ],
        sideEffects: "None",
        admissionReviewVersions: ["v1"],
        failurePolicy,
        timeoutSeconds: 5,
      }));
  const configuration = (kind: string, hooks: readonly Hook[]): KubeObject => ({
    apiVersion: "admissionregistration.k8s.io/v1",
    kind,
    metadata: { name: "kube-storage-functions" },
    webhooks: webhooks(hooks),
  });
  return [
    configuration("MutatingWebhookConfiguration", MUTATING),
    configuration("ValidatingWebhookConfiguration", VALIDATING),
  ];
}

/** Seeds the admission webhooks into the sandbox, failurePolicy Ignore (see above). */
export function registerAdmissionWebhooks(registry: Registry, url: string, caCertPem: string): void {
  for (const object of admissionWebhookConfigurations(url, caCertPem, "Ignore")) registry.seed(object);
}
