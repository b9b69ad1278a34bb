// A mistyped knob stops the function at start, as every other setting does:
// the process exits non-zero naming the variable and what it held, before it
// reads a kubeconfig or dials a CSI driver (so none is needed here).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { startFunctionProcess } from "../helpers/function-process.ts";

const cases: { fn: string; env: Record<string, string>; message: RegExp }[] = [
  { fn: "binder", env: { WORKERS: "0" }, message: /WORKERS must be an integer from 1 to 10000, got "0"/ },
  {
    fn: "protection",
    env: { KUBE_API_QPS: "fast" },
    message: /KUBE_API_QPS must be a number from 0 to 1000000/,
  },
  {
    fn: "attach-detach",
    env: { KUBE_API_BURST: "20" },
    message: /KUBE_API_BURST needs KUBE_API_QPS above 0/,
  },
  {
    fn: "provisioner",
    env: { RETRY_INTERVAL_START_SECONDS: "1s" },
    message: /RETRY_INTERVAL_START_SECONDS must be an integer from 1 to 86400, got "1s"/,
  },
  {
    fn: "attacher",
    env: { RETRY_INTERVAL_START_SECONDS: "60", RETRY_INTERVAL_MAX_SECONDS: "30" },
    message: /RETRY_INTERVAL_MAX_SECONDS \(30\) must not be less than RETRY_INTERVAL_START_SECONDS \(60\)/,
  },
];

describe("a bad knob refuses the start", () => {
  for (const c of cases) {
    test(`${c.fn} with ${JSON.stringify(c.env)}`, async () => {
      const started = startFunctionProcess(c.fn, { KUBECONFIG: "", CSI_ENDPOINT: "", ...c.env });
      await assert.rejects(started, (err: Error) => {
        assert.match(err.message, new RegExp(`^${c.fn} exited with [1-9]`));
        assert.match(err.message, c.message);
        return true;
      });
    });
  }
});
