// The AdmissionReview v1 request kube-apiserver sends about a claim, member
// for member, for the tools that post one themselves (the benches,
// scripts/real-cluster-admission.ts). The functions only parse reviews
// (review.ts); this one is never on their path.
import type { KubeObject } from "../kube/types.ts";

export interface ClaimReviewRequest {
  uid: string;
  operation: "CREATE" | "UPDATE";
  name: string;
  namespace: string;
  userInfo: { username: string; groups?: string[] };
  object: KubeObject;
  /** UPDATE's object before the change. */
  oldObject?: KubeObject;
}

export function claimAdmissionReview(r: ClaimReviewRequest): object {
  const kind = { group: "", version: "v1", kind: "PersistentVolumeClaim" };
  const resource = { group: "", version: "v1", resource: "persistentvolumeclaims" };
  return {
    kind: "AdmissionReview",
    apiVersion: "admission.k8s.io/v1",
    request: {
      uid: r.uid,
      kind,
      resource,
      requestKind: kind,
      requestResource: resource,
      name: r.name,
      namespace: r.namespace,
      operation: r.operation,
      userInfo: r.userInfo,
      object: r.object,
      oldObject: r.oldObject ?? null,
      dryRun: false,
      options: {
        kind: r.operation === "CREATE" ? "CreateOptions" : "UpdateOptions",
        apiVersion: "meta.k8s.io/v1",
      },
    },
  };
}
