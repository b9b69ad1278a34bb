// How every function process runs: the image sets these in its environment
// (deploy/Dockerfile) and the benches start functions with the same, so the
// memory figures are those of what is deployed.
//
// Figures for each setting: bench/README.md, "History of the function runtime's start-up and memory figures".

// Node sizes its heap for the machine; these bounds keep a function under 128 MiB at a small cost in scavenges.
export const FUNCTION_NODE_OPTIONS = "--max-semi-space-size=4 --max-old-space-size=64";

// FUNCTION=controllers hosts every controller's watched copies in one heap, and
// its allocation rate is theirs together: young space four times as large cut
// its CPU by about a seventh on the real-server bench (bench/README.md, "One process").
export const CONTROLLERS_NODE_OPTIONS = "--max-semi-space-size=16 --max-old-space-size=256";

// One malloc arena: memory freed in one thread's arena is not reused by another's, so each kept a high-water mark.
const FUNCTION_MALLOC_ARENA_MAX = "1";

// glibc's starting thresholds (128 KiB), set so glibc does not raise them and keep large freed buffers resident.
const FUNCTION_MALLOC_THRESHOLD = "131072";

/** The environment the image gives every function process. */
export const FUNCTION_PROCESS_ENV: Readonly<Record<string, string>> = Object.freeze({
  NODE_OPTIONS: FUNCTION_NODE_OPTIONS,
  MALLOC_ARENA_MAX: FUNCTION_MALLOC_ARENA_MAX,
  MALLOC_MMAP_THRESHOLD_: FUNCTION_MALLOC_THRESHOLD,
  MALLOC_TRIM_THRESHOLD_: FUNCTION_MALLOC_THRESHOLD,
});
