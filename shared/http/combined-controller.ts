// Two controllers served as one function (the provisioner and its capacity
// tracking, as external-provisioner runs both): every event goes to both, the
// reports of each are answered together, and a resync runs both passes.
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
