// Requests as Knative ApiServerSource, PingSource and a watch forwarder send
// them, for the events tests.

export const API_SERVER = "https://10.96.0.1:443";

/** A claim as the API server returns it (Resource mode sends the whole object). */
export function pvc(overrides: { name?: string; resourceVersion?: string; phase?: string } = {}) {
  const name = overrides.name ?? "data-postgres-0";
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name,
      namespace: "databases",
      uid: "5f0c6d4e-8a51-4f4b-9a7e-3f1f6b2d9c01",
      resourceVersion: overrides.resourceVersion ?? "184467",
      creationTimestamp: "2026-11-20T08:15:42Z",
      labels: { app: "postgres" },
      annotations: { "volume.kubernetes.io/storage-provisioner": "hostpath.csi.k8s.io" },
      finalizers: ["kubernetes.io/pvc-protection"],
      managedFields: [
        {
          manager: "kube-controller-manager",
          operation: "Update",
          apiVersion: "v1",
          time: "2026-11-20T08:15:42Z",
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:metadata": { "f:annotations": { ".": {}, "f:volume.kubernetes.io/storage-provisioner": {} } },
          },
        },
      ],
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "10Gi" } },
      storageClassName: "csi-hostpath",
      volumeMode: "Filesystem",
    },
    status: { phase: overrides.phase ?? "Pending" },
  };
}

export function pv(name = "pvc-5f0c6d4e-8a51-4f4b-9a7e-3f1f6b2d9c01") {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name, uid: "0d8e7c14-1111-4a2b-8c3d-9e8f7a6b5c4d", resourceVersion: "184470" },
    spec: { capacity: { storage: "10Gi" }, csi: { driver: "hostpath.csi.k8s.io", volumeHandle: "vol-1" } },
    status: { phase: "Available" },
  };
}

type Headers = Record<string, string>;

/** Binary mode, as the Go SDK in the ApiServerSource adapter writes the headers. */
export function binaryHeaders(action: "add" | "update" | "delete", overrides: Headers = {}): Headers {
  return {
    "content-type": "application/json",
    "ce-specversion": "1.0",
    "ce-id": "8a7f0c52-3e9b-4d61-a0f2-6c1d9e4b7a35",
    "ce-source": API_SERVER,
    "ce-type": `dev.knative.apiserver.resource.${action}`,
    "ce-subject": "/apis/v1/namespaces/databases/persistentvolumeclaims/data-postgres-0",
    "ce-time": "2026-11-21T10:00:00.123456Z",
    "ce-kind": "PersistentVolumeClaim",
    "ce-apiversion": "v1",
    "ce-name": "data-postgres-0",
    "ce-namespace": "databases",
    "ce-knativearrivaltime": "2026-11-21T10:00:00.2Z",
    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "user-agent": "Go-http-client/1.1",
    ...overrides,
  };
}

/** Structured mode: the same event as one JSON object. */
export function structuredEvent(type: string, data: unknown, extra: Record<string, unknown> = {}) {
  return {
    specversion: "1.0",
    id: "0b7c1d22-9e4f-4a8b-b6c3-2d5e8f1a4c97",
    source: API_SERVER,
    type,
    subject: "/apis/v1/namespaces/databases/persistentvolumeclaims/data-postgres-0",
    time: "2026-11-21T10:00:00Z",
    datacontenttype: "application/json",
    kind: "PersistentVolumeClaim",
    apiversion: "v1",
    name: "data-postgres-0",
    namespace: "databases",
    data,
    ...extra,
  };
}

export const STRUCTURED = { "content-type": "application/cloudevents+json; charset=utf-8" };
export const BATCH = { "content-type": "application/cloudevents-batch+json" };
export const JSON_CT = { "content-type": "application/json" };

export function json(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value));
}
