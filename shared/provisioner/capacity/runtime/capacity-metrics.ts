// external-provisioner's capacity gauges (pkg/capacity/capacity.go), unlabelled:
// how many objects the classes and segments call for, how many of those exist,
// and how many managed objects are waiting to be deleted. Upstream computes
// them from its informer; here each class sync and each resync's sweep
// record what they read, and the gauges hold the sums of the latest figures.
import { gauge, processMetrics, type Registry } from "../../../metrics.ts";

export interface CapacityFigures {
  goal: number;
  current: number;
  obsolete: number;
}

export interface CapacityMetrics {
  record(className: string, figures: CapacityFigures): void;
  forget(className: string): void;
}

export function capacityMetrics(registry: Registry = processMetrics()): CapacityMetrics {
  const perClass = new Map<string, CapacityFigures>();
  const goal = gauge(registry, {
    name: "csistoragecapacities_desired_goal",
    help: "Number of CSIStorageCapacity objects that are supposed to be managed automatically.",
  });
  const current = gauge(registry, {
    name: "csistoragecapacities_desired_current",
    help: "Number of CSIStorageCapacity objects that exist and are supposed to be managed automatically.",
  });
  const obsolete = gauge(registry, {
    name: "csistoragecapacities_obsolete",
    help: "Number of CSIStorageCapacity objects that exist and will be deleted automatically.",
  });
  const publish = () => {
    let g = 0;
    let c = 0;
    let o = 0;
    for (const f of perClass.values()) {
      g += f.goal;
      c += f.current;
      o += f.obsolete;
    }
    goal.set(g);
    current.set(c);
    obsolete.set(o);
  };
  return {
    record(className, figures) {
      perClass.set(className, figures);
      publish();
    },
    forget(className) {
      perClass.delete(className);
      publish();
    },
  };
}
