// Controllers served as one function: the provisioner and its capacity
// tracking, as external-provisioner runs both (combineControllers), or
// several controller functions in one process (hostControllers, as
// kube-controller-manager hosts its controllers). Every event goes to each,
// and the answer waits for all of them, so no sync is still running when the
// sender hears back; the first failure is then the answer (a retry is
// harmless to those that succeeded: every sync is level-based).
import type { Controller, ControllerEvent } from "./controller-function.ts";

/** Every outcome, or the first failure once all have settled. */
async function settled<T>(work: Promise<T>[]): Promise<T[]> {
  const outcomes = await Promise.allSettled(work);
  const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
  if (failed) throw failed.reason;
  return outcomes.map((o) => (o as PromiseFulfilledResult<T>).value);
}

/** Each event to every controller, their reports together, and every resync pass. */
function fanOut(controllers: readonly Controller[]) {
  return {
    async handleEvent(e: ControllerEvent): Promise<object[]> {
      return (await settled(controllers.map((c) => c.handleEvent(e)))).flat();
    },
    resyncAll: (): Promise<object[]> => settled(controllers.map((c) => c.resync())),
  };
}

/** The primary's resync report at the top, the others' under their names. */
export function combineControllers(primary: Controller, named: Record<string, Controller>): Controller {
  const others = Object.entries(named);
  const all = fanOut([primary, ...others.map(([, c]) => c)]);
  return {
    handleEvent: all.handleEvent,
    async resync() {
      const [main, ...rest] = await all.resyncAll();
      return { ...main, ...Object.fromEntries(others.map(([name], i) => [name, rest[i]])) };
    },
  };
}

/** Named controllers as one; a resync reports each pass under its name. */
export function hostControllers(named: Readonly<Record<string, Controller>>): Controller {
  const parts = Object.entries(named);
  if (parts.length === 0) throw new Error("hostControllers: no controllers");
  const all = fanOut(parts.map(([, c]) => c));
  return {
    handleEvent: all.handleEvent,
    async resync() {
      const reports = await all.resyncAll();
      return Object.fromEntries(parts.map(([name], i) => [name, reports[i]]));
    },
  };
}
