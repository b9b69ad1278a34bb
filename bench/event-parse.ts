// Micro-benchmark of parseEventRequest (shared/events) on the requests a
// function receives: ApiServerSource's binary-mode CloudEvent carrying a
// PersistentVolumeClaim of about 2 KB, the same event in structured mode, and
// a batch of 32 of them (what the forwarder sends when a backlog builds up).
// Prints one JSON line. Not part of `npm test`; run with
//   node bench/event-parse.ts [--events N] [--rounds R] [--against MODULE]
// --against names another module exporting parseEventRequest (e.g. a copy of
// shared/events from an older commit); the two are then run alternately in
// this one process and reported side by side.
import { PerformanceObserver } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { parseEventRequest } from "../shared/events/index.ts";

type Parse = (headers: Record<string, string | string[] | undefined>, body: unknown) => unknown[];

const { values: args } = parseArgs({
  options: {
    events: { type: "string", default: "20000" },
    rounds: { type: "string", default: "7" },
    against: { type: "string" },
  },
});
const EVENTS = Number(args.events);
const ROUNDS = Number(args.rounds);

const API_SERVER = "https://10.96.0.1:443";
const NAME = "data-postgres-0";

/** A claim as the API server sends it after binding, with the usual managedFields. */
function claim() {
  const time = "2026-11-20T08:15:42Z";
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: NAME,
      namespace: "databases",
      uid: "5f0c6d4e-8a51-4f4b-9a7e-3f1f6b2d9c01",
      resourceVersion: "184467",
      creationTimestamp: time,
      labels: { app: "postgres", "app.kubernetes.io/instance": "postgres", role: "primary" },
      annotations: {
        "pv.kubernetes.io/bind-completed": "yes",
        "pv.kubernetes.io/bound-by-controller": "yes",
        "volume.beta.kubernetes.io/storage-provisioner": "hostpath.csi.k8s.io",
        "volume.kubernetes.io/storage-provisioner": "hostpath.csi.k8s.io",
        "volume.kubernetes.io/selected-node": "worker-1",
      },
      finalizers: ["kubernetes.io/pvc-protection"],
      managedFields: [
        {
          manager: "kube-scheduler",
          operation: "Update",
          apiVersion: "v1",
          time,
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:metadata": { "f:annotations": { ".": {}, "f:volume.kubernetes.io/selected-node": {} } },
          },
        },
        {
          manager: "kube-controller-manager",
          operation: "Update",
          apiVersion: "v1",
          time,
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:metadata": {
              "f:annotations": {
                "f:pv.kubernetes.io/bind-completed": {},
                "f:pv.kubernetes.io/bound-by-controller": {},
                "f:volume.beta.kubernetes.io/storage-provisioner": {},
                "f:volume.kubernetes.io/storage-provisioner": {},
              },
            },
            "f:spec": { "f:volumeName": {} },
          },
        },
        {
          manager: "kube-controller-manager",
          operation: "Update",
          apiVersion: "v1",
          time,
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:status": { "f:accessModes": {}, "f:capacity": { ".": {}, "f:storage": {} }, "f:phase": {} },
          },
          subresource: "status",
        },
      ],
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "10Gi" } },
      storageClassName: "csi-hostpath",
      volumeMode: "Filesystem",
      volumeName: "pvc-5f0c6d4e-8a51-4f4b-9a7e-3f1f6b2d9c01",
    },
    status: { phase: "Bound", accessModes: ["ReadWriteOnce"], capacity: { storage: "10Gi" } },
  };
}

/** Headers as Node hands them over from the ApiServerSource adapter's request. */
const binaryHeaders = {
  host: "binder.storage.svc.cluster.local",
  "user-agent": "Go-http-client/1.1",
  "content-length": "2048",
  "accept-encoding": "gzip",
  "content-type": "application/json",
  "ce-specversion": "1.0",
  "ce-id": "8a7f0c52-3e9b-4d61-a0f2-6c1d9e4b7a35",
  "ce-source": API_SERVER,
  "ce-type": "dev.knative.apiserver.resource.update",
  "ce-subject": `/apis/v1/namespaces/databases/persistentvolumeclaims/${NAME}`,
  "ce-time": "2026-11-21T10:00:00.123456Z",
  "ce-kind": "PersistentVolumeClaim",
  "ce-apiversion": "v1",
  "ce-name": NAME,
  "ce-namespace": "databases",
  traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
};
const binaryBody = Buffer.from(JSON.stringify(claim()));

const structuredHeaders = {
  host: binaryHeaders.host,
  "user-agent": "Go-http-client/1.1",
  "content-type": "application/cloudevents+json; charset=utf-8",
};
const structuredEvent = {
  specversion: "1.0",
  id: binaryHeaders["ce-id"],
  source: API_SERVER,
  type: binaryHeaders["ce-type"],
  subject: binaryHeaders["ce-subject"],
  time: binaryHeaders["ce-time"],
  datacontenttype: "application/json",
  kind: "PersistentVolumeClaim",
  apiversion: "v1",
  name: NAME,
  namespace: "databases",
  data: claim(),
};
const structuredBody = Buffer.from(JSON.stringify(structuredEvent));
const BATCH_SIZE = 32;
const batchBody = Buffer.from(
  JSON.stringify(Array.from({ length: BATCH_SIZE }, (_, i) => ({ ...structuredEvent, id: `${i}` }))),
);

const cases = {
  binary: { headers: binaryHeaders, body: binaryBody, events: 1 },
  structured: { headers: structuredHeaders, body: structuredBody, events: 1 },
  batch: {
    headers: { ...structuredHeaders, "content-type": "application/cloudevents-batch+json" },
    body: batchBody,
    events: BATCH_SIZE,
  },
};
type CaseName = keyof typeof cases;

let gcMs = 0;
const gcObserver = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcMs += entry.duration;
});
gcObserver.observe({ entryTypes: ["gc"] });

/** GC entries are delivered asynchronously, after the run that caused them; a short timer collects them. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 5));

async function run(parse: Parse, name: CaseName): Promise<{ usPerEvent: number; gcMsPer1000: number }> {
  const { headers, body, events: perRequest } = cases[name];
  const requests = Math.ceil(EVENTS / perRequest);
  await settle();
  const gcBefore = gcMs;
  const start = process.hrtime.bigint();
  let events = 0;
  for (let i = 0; i < requests; i++) events += parse(headers, body).length;
  const ns = Number(process.hrtime.bigint() - start);
  await settle();
  if (events !== requests * perRequest)
    throw new Error(`${name}: ${events} events from ${requests} requests`);
  return { usPerEvent: ns / 1000 / events, gcMsPer1000: ((gcMs - gcBefore) * 1000) / events };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

const implementations: Array<[string, Parse]> = [["current", parseEventRequest]];
if (args.against !== undefined) {
  const other = (await import(new URL(args.against, `file://${process.cwd()}/`).href)) as {
    parseEventRequest: Parse;
  };
  implementations.push(["against", other.parseEventRequest]);
}

const samples = new Map<string, { us: number[]; gc: number[] }>();
for (const [impl, parse] of implementations) {
  for (const name of Object.keys(cases) as CaseName[]) {
    const reference = JSON.stringify(parseEventRequest(cases[name].headers, cases[name].body));
    if (JSON.stringify(parse(cases[name].headers, cases[name].body)) !== reference)
      throw new Error(`${impl} parses the ${name} event differently`);
    samples.set(`${impl}/${name}`, { us: [], gc: [] });
    await run(parse, name); // warm-up
  }
}
// Alternate implementations within each round so machine noise hits both alike.
for (let round = 0; round < ROUNDS; round++) {
  for (const name of Object.keys(cases) as CaseName[]) {
    for (const [impl, parse] of round % 2 === 0 ? implementations : [...implementations].reverse()) {
      const { usPerEvent, gcMsPer1000 } = await run(parse, name);
      const sample = samples.get(`${impl}/${name}`);
      sample?.us.push(usPerEvent);
      sample?.gc.push(gcMsPer1000);
    }
  }
}
gcObserver.disconnect();

const result: Record<string, unknown> = {
  events: EVENTS,
  rounds: ROUNDS,
  bodyBytes: { binary: binaryBody.length, structured: structuredBody.length, batch: batchBody.length },
};
for (const [key, { us, gc }] of samples) {
  const usPerEvent = median(us);
  result[key] = {
    eventsPerSecond: Math.round(1e6 / usPerEvent),
    usPerEvent: Number(usPerEvent.toFixed(2)),
    usPerEventRange: [Number(Math.min(...us).toFixed(2)), Number(Math.max(...us).toFixed(2))],
    gcMsPer1000Events: Number(median(gc).toFixed(2)),
  };
}
console.log(JSON.stringify(result));
