// external-provisioner's capacity tracking (--enable-capacity, central mode)
// as a controller on the shared runtime, served by the provisioner function.
// A key is one StorageClass (or the resync's sweep): load reads the class,
// the driver's segments (CSINodes and Nodes), the managed objects of the
// class and the driver's GetCapacity per segment; the plan (../plan-capacity.ts)
// creates, updates and deletes CSIStorageCapacity objects. Refreshed on the
// resync (PingSource), on StorageClass, CSINode and Node changes, on a PV of
// this driver created or deleted (a provisioning or deletion changed what is
// free), and when one of our objects is deleted by someone else.
import { ControllerRuntime, type ControllerSpec, type Executors } from "../../../controller/index.ts";
import type { CsiClient } from "../../../csi/client.ts";
import type { ControllerEvent } from "../../../http/controller-function.ts";
import { getOptional } from "../../../kube/api-errors.ts";
import type { KubeJsonClient } from "../../../kube/json-client.ts";
import { csiStorageCapacities, storageClasses } from "../../../kube/resources.ts";
import { listStorageClasses, type StorageClassCopy } from "../../../kube/storage-class-copy.ts";
import type { CSIStorageCapacity, StorageClass } from "../../../kube/types.ts";
import type { NodeTopologyCopies } from "../../runtime/load-request.ts";
import { nodesAndCsiNodes } from "../../runtime/topology-copies.ts";
import { driverNameLabel, managedByCentral, managedByLabel } from "../constants.ts";
import {
  type CapacityAnswer,
  type CapacityOptions,
  type CapacityStep,
  type ClassCapacityState,
  classIsTracked,
  planClassCapacity,
  planSweep,
} from "../plan-capacity.ts";
import { type Segment, segmentId, segmentOfSelector, segmentsOf } from "../segments.ts";
import { type CapacityMetrics, capacityMetrics } from "./capacity-metrics.ts";

export interface CapacityReport {
  object: string;
  outcome: string;
  writes: number;
  error?: string;
}

export interface CapacityControllerOptions extends CapacityOptions {
  kube: KubeJsonClient;
  csi: CsiClient;
  /**
   * The provisioner's watched copies of every Node and CSINode: a class sync reads the segments
   * from them instead of listing both, once per class. None: list.
   */
  topology?: () => NodeTopologyCopies;
  /**
   * The provisioner's watched copy of the StorageClasses: which classes a Node or CSINode change
   * refreshes (each class sync still reads its class, and the sweep lists them, live). None: list.
   */
  storageClasses?: () => StorageClassCopy;
  metrics?: CapacityMetrics;
  /** Classes a resync refreshes at once. Default 1 (upstream's --capacity-threads). */
  resyncConcurrency?: number;
}

/** `live`: the copies had not caught up with the Node or CSINode event that asked for the sync. */
type CapacityKey = { kind: "class"; name: string; live?: boolean } | { kind: "sweep" };

/** How long a Node or CSINode event waits for the copy to reach it before its syncs list instead. */
const COPY_CATCH_UP_MS = 250;

type CapacityState =
  | { kind: "class"; state: ClassCapacityState }
  | { kind: "sweep"; objects: CSIStorageCapacity[]; classes: StorageClass[] };

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

function recordOf(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === "object" && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}

function capacitySpec(
  o: CapacityControllerOptions,
  metrics: CapacityMetrics,
): ControllerSpec<CapacityKey, CapacityState, CapacityStep, never, never, CapacityReport> {
  const { kube, csi } = o;
  const selector = `${driverNameLabel}=${o.driverName},${managedByLabel}=${managedByCentral}`;
  /** Node labels as last seen here, so that a status-only Node update refreshes nothing. */
  const nodeLabels = new Map<string, string>();

  const managedObjects = async () =>
    (
      await kube.list<CSIStorageCapacity>(csiStorageCapacities, {
        namespace: o.namespace,
        labelSelector: selector,
      })
    ).items;

  async function trackedClassKeys(live = false): Promise<CapacityKey[]> {
    // A class the copy lacks yet brings its own event; one it still holds after a delete syncs to "gone".
    const classes = await listStorageClasses(kube, o.storageClasses?.());
    return classes
      .filter((c) => classIsTracked(c, o))
      .map((c) => ({ kind: "class", name: c.metadata.name, ...(live ? { live } : {}) }));
  }

  /** Class keys for a Node or CSINode change, read from the copy only once it holds that change. */
  async function keysForTopologyChange(which: "nodes" | "csiNodes", object: unknown): Promise<CapacityKey[]> {
    const copies = o.topology?.();
    if (!copies) return trackedClassKeys();
    const rv = str(recordOf(recordOf(object)?.metadata)?.resourceVersion);
    const reached = await copies[which].store.whenCovers(rv, COPY_CATCH_UP_MS);
    return trackedClassKeys(!reached);
  }

  /** The gauges follow what each class sync reads (upstream: its informer). */
  function recorded(s: { kind: "class"; state: ClassCapacityState }): CapacityState {
    const { state } = s;
    const tracked = classIsTracked(state.storageClass, o);
    const wanted = new Set(state.segments.map(segmentId));
    const current = state.existing.filter((c) => {
      const seg = segmentOfSelector(c.nodeTopology);
      return tracked && seg !== undefined && wanted.has(segmentId(seg));
    }).length;
    if (!tracked && state.existing.length === 0) metrics.forget(state.className);
    else
      metrics.record(state.className, {
        goal: tracked ? state.segments.length : 0,
        current,
        obsolete: state.existing.length - current,
      });
    return s;
  }

  const answer = (object: string, outcome: string) => ({ reports: [{ object, outcome, writes: 0 }] });

  async function capacityOf(cls: StorageClass, segment: Segment): Promise<CapacityAnswer> {
    try {
      const keyed = Object.keys(segment).length > 0;
      const r = await csi.getCapacity({
        // Verbatim, csi.storage.k8s.io/* keys included, as upstream sends them.
        parameters: { ...(cls.parameters ?? {}) },
        ...(keyed ? { accessibleTopology: { segments: { ...segment } } } : {}),
      });
      return {
        available: BigInt(r.availableCapacity ?? 0),
        ...(r.maximumVolumeSize ? { maximum: BigInt(r.maximumVolumeSize.value) } : {}),
      };
    } catch (err) {
      return { error: err instanceof Error ? err.message : String(err) };
    }
  }

  const executors: Executors<CapacityStep, CapacityKey> = {
    async "create-capacity"(step) {
      const { name: _none, ...metadata } = step.object.metadata;
      await kube.create(csiStorageCapacities, {
        ...step.object,
        metadata: metadata as typeof step.object.metadata,
      });
      return 1;
    },
    async "update-capacity"(step) {
      await kube.replace(csiStorageCapacities, step.object);
      return 1;
    },
    async "delete-capacity"(step) {
      await getOptional(() =>
        kube.delete(
          csiStorageCapacities,
          step.name,
          o.namespace,
          step.uid ? { preconditions: { uid: step.uid } } : {},
        ),
      );
      return 1;
    },
  };

  return {
    keyId: (key) => (key.kind === "class" ? `class ${key.name}` : "sweep"),
    async keysOf(e: ControllerEvent) {
      const object = recordOf(e.object);
      switch (`${e.apiVersion}/${e.kind}`) {
        case "storage.k8s.io/v1/StorageClass":
          return [{ kind: "class", name: e.name }];
        case "storage.k8s.io/v1/CSINode": {
          const drivers = recordOf(object?.spec)?.drivers;
          const listsUs =
            !Array.isArray(drivers) || drivers.some((d) => str(recordOf(d)?.name) === o.driverName);
          if (!listsUs && e.action !== "delete")
            return answer(`csinode ${e.name}`, "does not list the driver");
          return keysForTopologyChange("csiNodes", object);
        }
        case "v1/Node": {
          const labels = JSON.stringify(recordOf(recordOf(object?.metadata)?.labels) ?? {});
          const before = nodeLabels.get(e.name);
          if (e.action === "delete") nodeLabels.delete(e.name);
          else nodeLabels.set(e.name, labels);
          // A status write (heartbeats, volumesAttached) changes no segment; the resync catches what a new process missed.
          if (e.action === "update" && (before === undefined || before === labels))
            return answer(`node ${e.name}`, "labels unchanged");
          return keysForTopologyChange("nodes", object);
        }
        case "v1/PersistentVolume": {
          if (e.action === "update") return [];
          const spec = recordOf(object?.spec);
          if (str(recordOf(spec?.csi)?.driver) !== o.driverName) return [];
          const className = str(spec?.storageClassName);
          return className ? [{ kind: "class", name: className }] : [];
        }
        case "storage.k8s.io/v1/CSIStorageCapacity": {
          if (e.action !== "delete" || e.namespace !== o.namespace) return [];
          const labels = recordOf(recordOf(object?.metadata)?.labels);
          if (
            str(labels?.[driverNameLabel]) !== o.driverName ||
            str(labels?.[managedByLabel]) !== managedByCentral
          )
            return answer(`csistoragecapacity ${e.name}`, "not managed by this driver");
          const className = str(object?.storageClassName);
          return className ? [{ kind: "class", name: className }] : [];
        }
        default:
          return [];
      }
    },
    async load(key) {
      if (key.kind === "sweep") {
        const [objects, classes] = await Promise.all([
          managedObjects(),
          kube.list<StorageClass>(storageClasses).then((l) => l.items),
        ]);
        return { kind: "sweep", objects, classes };
      }
      const [cls, all] = await Promise.all([
        getOptional(() => kube.get<StorageClass>(storageClasses, key.name)),
        managedObjects(),
      ]);
      const existing = all.filter((c) => c.storageClassName === key.name);
      const state: ClassCapacityState = {
        className: key.name,
        ...(cls ? { storageClass: cls } : {}),
        segments: [],
        answers: new Map(),
        existing,
      };
      if (!classIsTracked(cls, o)) return recorded({ kind: "class", state });
      const [nodeList, csiNodeList] = await nodesAndCsiNodes(kube, key.live ? undefined : o.topology?.());
      const segments = segmentsOf(o.driverName, csiNodeList, nodeList);
      const answers = new Map<string, CapacityAnswer>();
      await Promise.all(
        segments.map(async (s) => {
          answers.set(segmentId(s), await capacityOf(cls, s));
        }),
      );
      return recorded({ kind: "class", state: { ...state, segments, answers } });
    },
    absent: () => "gone",
    decide: (s) => (s.kind === "sweep" ? planSweep(s.objects, s.classes, o) : planClassCapacity(s.state, o)),
    executors,
    report: (r) => ({
      object: r.id,
      outcome: r.outcome,
      writes: r.writes,
      ...(r.error ? { error: r.error } : {}),
    }),
    async resyncKeys() {
      const keys = await trackedClassKeys();
      return { waves: [keys, [{ kind: "sweep" }]], counts: { classes: keys.length } };
    },
  };
}

export class CapacityController extends ControllerRuntime<
  CapacityKey,
  CapacityState,
  CapacityStep,
  never,
  never,
  CapacityReport
> {
  constructor(o: CapacityControllerOptions) {
    super(capacitySpec(o, o.metrics ?? capacityMetrics()), {
      maxAttempts: 5,
      resyncConcurrency: Math.max(1, o.resyncConcurrency ?? 1),
    });
  }

  /** One class: read, ask the driver, write what changed. */
  syncClass(name: string): Promise<CapacityReport> {
    return this.sync({ kind: "class", name });
  }
}
