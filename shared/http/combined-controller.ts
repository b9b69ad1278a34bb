// Controllers served as one function: the provisioner and its capacity
// tracking, as external-provisioner runs both (combineControllers), or
// several controller functions in one process (hostControllers, as
// kube-controller-manager hosts its controllers). Every event goes to each,
// their reports are answered together, and a resync runs every pass.
import type { Controller, ControllerEvent } from "./controller-function.ts";

export function combineControllers(primary: Controller, named: Record<string, Controller>): Controller {
  const others = Object.entries(named);
  return {
    async handleEvent(e: ControllerEvent) {
      const answers = await Promise.all([primary.handleEvent(e), ...others.map(([, c]) => c.handleEvent(e))]);
      return answers.flat();
    },
    async resync() {
      const [main, ...rest] = await Promise.all([primary.resync(), ...others.map(([, c]) => c.resync())]);
      return { ...main, ...Object.fromEntries(others.map(([name], i) => [name, rest[i]])) };
    },
  };
}

/**
 * Named controllers as one: each event is handed to every one (a controller
 * answers [] for kinds it does not take), and the answer waits for all of
 * them, so no sync is still running when the sender hears back; the first
 * failure is then the answer (a retry is harmless to those that succeeded:
 * every sync is level-based). A resync reports each pass under its name.
 */
export function hostControllers(named: Readonly<Record<string, Controller>>): Controller {
  const parts = Object.entries(named);
  if (parts.length === 0) throw new Error("hostControllers: no controllers");
  const settle = async <T>(work: Promise<T>[]): Promise<T[]> => {
    const outcomes = await Promise.allSettled(work);
    const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
    if (failed) throw failed.reason;
    return outcomes.map((o) => (o as PromiseFulfilledResult<T>).value);
  };
  return {
    async handleEvent(e: ControllerEvent) {
      return (await settle(parts.map(([, c]) => c.handleEvent(e)))).flat();
    },
    async resync() {
      const reports = await settle(parts.map(([, c]) => c.resync()));
      return Object.fromEntries(parts.map(([name], i) => [name, reports[i]]));
    },
  };
}
