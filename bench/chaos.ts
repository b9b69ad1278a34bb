// `npm run chaos`: the release-time chaos run of issue 8. 1,000 claims (half
// static PVs, half provisioned) through 8 function processes per controller
// behind a dispatcher that duplicates and shuffles events, with API and CSI
// faults, SIGKILLs and pods coming and going; half the provisioned claims are
// grown and re-tiered (VolumeAttributesClass) by the user meanwhile (issue
// 18); then faults off, resync until quiet, and the invariants. Progress on stderr, ONE JSON document on stdout.
// Parameters: `--claims=200 --instances=4 ...` or CHAOS_CLAIMS=200 ...
// (bench/chaos/options.ts lists them). Exit code 1 when an invariant is broken.
import { chaosOptionsFrom } from "./chaos/options.ts";
import { runChaos } from "./chaos/run.ts";

let options: ReturnType<typeof chaosOptionsFrom>;
try {
  options = chaosOptionsFrom(process.argv.slice(2), process.env);
} catch (err) {
  process.stderr.write(`chaos: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(2);
}
try {
  const report = await runChaos(options);
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  process.exitCode = report.ok ? 0 : 1;
} catch (err) {
  process.stderr.write(
    `chaos: run failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exitCode = 1;
}
