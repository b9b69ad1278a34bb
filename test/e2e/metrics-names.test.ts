// The README's metrics table against what the functions really serve: every
// function as its own process on the sandbox cluster (sandbox/system.ts), a
// short life of a volume (claim provisioned and bound, pod attached and
// running, both deleted), then each function's GET /metrics must carry every
// metric the table gives it, with the table's type, and its samples the
// table's labels. The table is parsed here, so it cannot drift from the code.
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { get as httpGet, type IncomingMessage } from "node:http";
import { get as httpsGet } from "node:https";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { type RunningSystem, startSystem, systemFunctions } from "../../sandbox/system.ts";
import { isNotFound } from "../../shared/kube/api-errors.ts";
import {
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  storageClasses,
} from "../../shared/kube/resources.ts";
import type { KubeObject, PersistentVolumeClaim, Pod } from "../../shared/kube/types.ts";
import { processMetrics } from "../../shared/metrics.ts";
import { waitFor } from "../helpers/wait-for.ts";

const ns = "default";

interface Row {
  name: string;
  type: string;
  /** Label names, sorted; [] for none. */
  labels: string[];
  functions: string[];
  /** Functions that serve the metric only when a feature is on (marked ² in the table). */
  conditional: string[];
}

/** The rows of the README's "### Metrics" table. */
async function readmeRows(functionNames: readonly string[]): Promise<Row[]> {
  const readme = await readFile(resolve(import.meta.dirname, "../../README.md"), "utf8");
  const start = readme.indexOf("\n### Metrics\n");
  assert.ok(start >= 0, "README has a ### Metrics section");
  const section = readme.slice(start + 1).split(/\n#{2,3} /)[0] ?? "";
  const rows: Row[] = [];
  for (const line of section.split("\n")) {
    if (!line.startsWith("| `")) continue;
    const cells = line.split("|").map((c) => c.trim());
    const [, nameCell = "", type = "", labelCell = "", functionCell = ""] = cells;
    const name = /^`([a-z_:][a-z0-9_:]*)`$/.exec(nameCell)?.[1];
    assert.ok(name, `a metric name in backticks: ${nameCell}`);
    const labels = labelCell === "—" ? [] : labelCell.split(",").map((l) => l.trim());
    const named = [...functionCell.matchAll(/`([a-z-]+)`(²)?/g)];
    const functions = named.map((m) => m[1] as string);
    const conditional = named.filter((m) => m[2]).map((m) => m[1] as string);
    if (functionCell.includes("every function")) functions.push(...functionNames);
    rows.push({ name, type, labels: labels.sort(), functions, conditional });
  }
  return rows;
}

interface Exposition {
  types: Map<string, string>;
  /** Label-name sets seen on each metric's samples (histogram series folded into the metric, `le` left out). */
  labelSets: Map<string, Set<string>>;
  /** Sample lines, as served. */
  lines: string[];
}

function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const labelSets = new Map<string, Set<string>>();
  const lines: string[] = [];
  for (const line of text.split("\n")) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1] as string, type[2] as string);
    if (line === "" || line.startsWith("#")) continue;
    lines.push(line);
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? /.exec(line);
    if (!sample) continue;
    let metric = sample[1] as string;
    const base = metric.replace(/_(bucket|sum|count)$/, "");
    if (base !== metric && types.get(base) === "histogram") metric = base;
    const names = [...(sample[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"/g)]
      .map((m) => m[1] as string)
      .filter((n) => n !== "le")
      .sort();
    const sets = labelSets.get(metric) ?? new Set<string>();
    sets.add(names.join(","));
    labelSets.set(metric, sets);
  }
  return { types, labelSets, lines };
}

/** GET over HTTP or HTTPS; the admission function's certificate is the sandbox's own, not checked here. */
function get(url: string): Promise<string> {
  return new Promise((done, fail) => {
    const request = url.startsWith("https:")
      ? httpsGet(url, { rejectUnauthorized: false }, answer)
      : httpGet(url, answer);
    request.on("error", fail);
    function answer(res: IncomingMessage): void {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        res.statusCode === 200
          ? done(Buffer.concat(chunks).toString("utf8"))
          : fail(new Error(`GET ${url}: ${res.statusCode}`)),
      );
      res.on("error", fail);
    }
  });
}

describe("metric names: the README table against every function's /metrics", () => {
  let dir: string;
  let system: RunningSystem;
  const scraped = new Map<string, Exposition>();
  const functionNames = systemFunctions.map((f) => f.name);

  async function scrape(name: string): Promise<Exposition> {
    // The forwarder runs inside this process (sandbox/system.ts) on the process registry.
    const text =
      name === "forwarder" ? await processMetrics().metrics() : await get(`${system.url(name)}/metrics`);
    return parseExposition(text);
  }

  /** Whether a function's output has a sample of `metric` whose line contains every fragment. */
  async function hasSample(name: string, metric: string, ...fragments: string[]): Promise<true | undefined> {
    const { lines } = await scrape(name);
    return lines.some((l) => l.startsWith(metric) && fragments.every((f) => l.includes(f)))
      ? true
      : undefined;
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ksf-metrics-"));
    const t0 = Date.now();
    const mark = (what: string) =>
      process.env.METRICS_TEST_TIMING && console.error(`${Date.now() - t0} ms ${what}`);
    system = await startSystem({ dir, resyncSeconds: 0, logLevel: "error" });
    mark("system up");
    const driver = system.driverName;
    const kube = system.kube;
    const read = <T extends KubeObject>(r: typeof pods, name: string, namespace?: string) =>
      kube.get<T>(r, name, namespace).catch((err: unknown) => {
        if (isNotFound(err)) return undefined;
        throw err;
      });
    await kube.create(storageClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "attach" },
      provisioner: driver,
      reclaimPolicy: "Delete",
      volumeBindingMode: "Immediate",
    });
    await kube.create(persistentVolumeClaims, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "data", namespace: ns },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        storageClassName: "attach",
      },
    });
    await kube.create(pods, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "app", namespace: ns },
      spec: {
        containers: [{ name: "app", image: "busybox" }],
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: "data" } }],
      },
    });
    await waitFor("pod app Running", async () =>
      (await read<Pod>(pods, "app", ns))?.status?.phase === "Running" ? true : undefined,
    );
    mark("pod running");
    const claim = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "data", ns);
    const pvName = claim.spec.volumeName ?? "";
    // A resync pass sets the state gauges (the binder counts its lists, attach-detach every node).
    await system.resyncAll();
    scraped.set("binder (bound)", await scrape("binder"));
    scraped.set("attach-detach (running)", await scrape("attach-detach"));

    mark("resynced");
    await kube.delete(pods, "app", ns);
    await waitFor("pod app gone", async () => ((await read(pods, "app", ns)) ? undefined : true));
    mark("pod gone");
    await kube.delete(persistentVolumeClaims, "data", ns);
    await waitFor("the PV gone", async () => ((await read(persistentVolumes, pvName)) ? undefined : true));
    mark("pv gone");
    // The binder times the delete when the PV's DELETE event reaches it through the forwarder.
    await waitFor("the binder's delete observation", () =>
      hasSample("binder", "volume_operation_total_seconds_count", 'operation_name="delete"'),
    );
    for (const name of [...functionNames, "forwarder"]) scraped.set(name, await scrape(name));
  });

  after(async () => {
    await system?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("the table names only functions that exist, each metric once per function", async () => {
    const rows = await readmeRows(functionNames);
    assert.ok(rows.length >= 20, `the table has its rows (${rows.length})`);
    const known = new Set([...functionNames, "forwarder"]);
    const seen = new Set<string>();
    for (const row of rows) {
      assert.ok(row.functions.length > 0, `${row.name} names a function`);
      assert.ok(["counter", "gauge", "histogram"].includes(row.type), `${row.name}: type ${row.type}`);
      for (const f of row.functions) {
        assert.ok(known.has(f), `${row.name}: unknown function ${f}`);
        const key = `${f} ${row.name}`;
        assert.ok(!seen.has(key), `${key} listed twice`);
        seen.add(key);
      }
    }
  });

  it("every function serves every metric the table gives it, with the table's type and labels", async () => {
    const rows = await readmeRows(functionNames);
    const missing: string[] = [];
    for (const row of rows) {
      for (const f of row.functions) {
        const out = scraped.get(f);
        assert.ok(out, `scraped ${f}`);
        const type = out.types.get(row.name);
        if (type === undefined) {
          // A feature that is off serves nothing; the check below still catches an unlisted metric.
          if (!row.conditional.includes(f)) missing.push(`${f}: ${row.name}`);
          continue;
        }
        assert.equal(type, row.type, `${f}: ${row.name} is a ${row.type}`);
        for (const labels of out.labelSets.get(row.name) ?? [])
          assert.equal(labels, row.labels.join(","), `${f}: ${row.name} has labels ${row.labels.join(", ")}`);
      }
    }
    assert.deepEqual(missing, [], "metrics the README promises that the function does not serve");
  });

  it("every metric a function serves is in the table (Node.js and process defaults aside)", async () => {
    const rows = await readmeRows(functionNames);
    const unlisted: string[] = [];
    for (const f of [...functionNames, "forwarder"]) {
      const listed = new Set(rows.filter((r) => r.functions.includes(f)).map((r) => r.name));
      for (const name of scraped.get(f)?.types.keys() ?? []) {
        if (name.startsWith("process_") || name.startsWith("nodejs_")) continue;
        // This process's registry also holds the in-process sandbox's parts (its kubelets' CSI calls).
        if (f === "forwarder" && !name.startsWith("forwarder_")) continue;
        if (!listed.has(name)) unlisted.push(`${f}: ${name}`);
      }
    }
    assert.deepEqual(unlisted, [], "metrics served but missing from the README's table");
  });

  it("the life of a volume shows in the upstream metrics' samples", async () => {
    const samples = (key: string) => scraped.get(key)?.lines ?? [];
    const has = (key: string, metric: string, ...fragments: string[]) =>
      samples(key).some((l) => l.startsWith(metric) && fragments.every((f) => l.includes(f)));
    const csi = `plugin_name="kubernetes.io/csi:${system.driverName}"`;
    assert.ok(
      has("binder (bound)", "pv_collector_bound_pvc_count", 'namespace="default"', 'storage_class="attach"'),
      samples("binder (bound)").join("\n"),
    );
    assert.ok(has("binder (bound)", "pv_collector_bound_pv_count", 'storage_class="attach"'));
    assert.ok(has("binder (bound)", "pv_collector_total_pv_count", csi, 'volume_mode="Filesystem"'));
    assert.ok(
      has(
        "binder",
        "volume_operation_total_seconds_count",
        'operation_name="provision"',
        `plugin_name="${system.driverName}"`,
      ),
    );
    assert.ok(has("binder", "volume_operation_total_seconds_count", 'operation_name="delete"'));
    assert.ok(
      has(
        "attach-detach (running)",
        "attachdetach_controller_total_volumes",
        csi,
        'state="desired_state_of_world"',
      ),
    );
    assert.ok(
      has(
        "attach-detach (running)",
        "attachdetach_controller_total_volumes",
        csi,
        'state="actual_state_of_world"',
      ),
    );
    assert.ok(
      has(
        "provisioner",
        "csi_sidecar_operations_seconds_count",
        'method_name="/csi.v1.Controller/CreateVolume"',
      ),
    );
    assert.ok(
      has(
        "attacher",
        "csi_sidecar_operations_seconds_count",
        'method_name="/csi.v1.Controller/ControllerPublishVolume"',
      ),
    );
    assert.ok(has("provisioner", "controller_persistentvolumeclaim_provision_total", 'class="attach"'));
    assert.ok(has("provisioner", "controller_persistentvolume_delete_total", 'class="attach"'));
  });
});
