// How every function process runs: the image sets these in its environment
// (deploy/Dockerfile) and the benches start functions with the same, so the
// memory figures are those of what is deployed.
//
// NODE_OPTIONS: Node sizes its heap for the machine, not for a function:
// without limits a busy process lets garbage pile up to hundreds of MiB before
// collecting it (250-320 MiB under the bench's burst of 1,000 claims). A 4 MiB
// semi-space and a 64 MiB old generation keep a function under 128 MiB,
// with room for a binder's copy of 10,000 PVs (about 1.3 MiB per 1,000; past
// ~23,000 the binder drops its copy and lists instead, unless NODE_OPTIONS
// gives it a larger old generation). The semi-space is the trade: in the
// bench's burst each function allocates about 800 MiB, and scavenges took
// 1.05 s of the binder's 5.2 s of CPU at 2 MiB, 0.68-0.84 s at 4 MiB and
// 0.43-0.50 s at 8 MiB, while peak RSS went 101-115, 101-118 and 110-124 MiB.
export const FUNCTION_NODE_OPTIONS = "--max-semi-space-size=4 --max-old-space-size=64";

// MALLOC_ARENA_MAX: glibc gives each thread that allocates its own malloc
// arena, and a Node process has a dozen threads (V8's platform workers, the
// libuv pool). Memory freed in one arena is not reused by another, so under
// the burst the arenas each keep a high-water mark: one arena took the
// provisioner's peak from 124-137 to 119-125 MiB and the binder's from
// 121-136 to 117-120 MiB (bench, three runs each), with no change in
// throughput beyond the runs' noise. JavaScript runs on one thread, and the
// others allocate little through malloc, so they rarely wait for its lock.
export const FUNCTION_MALLOC_ARENA_MAX = "1";

// MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ at glibc's own starting
// values (128 KiB): set explicitly, they stop glibc from raising them each
// time a large block is freed (up to 32 and 64 MiB). Raised, large buffers
// (a list answer, TLS records) come from the heap and stay resident after
// they are freed: a binder kept ~10 MiB that way after its first list and
// watch (idle 100 -> 90 MiB with the thresholds set), and its burst peak went from 117-128 to 112-121 MiB
// (two runs each, throughput unchanged).
export const FUNCTION_MALLOC_THRESHOLD = "131072";

/** The environment the image gives every function process. */
export const FUNCTION_PROCESS_ENV: Readonly<Record<string, string>> = Object.freeze({
  NODE_OPTIONS: FUNCTION_NODE_OPTIONS,
  MALLOC_ARENA_MAX: FUNCTION_MALLOC_ARENA_MAX,
  MALLOC_MMAP_THRESHOLD_: FUNCTION_MALLOC_THRESHOLD,
  MALLOC_TRIM_THRESHOLD_: FUNCTION_MALLOC_THRESHOLD,
});
