// The V8 flags every function process runs with: the image sets them as
// NODE_OPTIONS (deploy/Dockerfile) and the benches start functions with them,
// so the memory figures are those of what is deployed. Node sizes its heap
// for the machine, not for a function: without limits a busy process lets
// garbage pile up to hundreds of MiB before collecting it (250-320 MiB under
// the bench's burst of 1,000 claims). A 2 MiB young generation and a 64 MiB
// old generation keep a function near 128 MiB, with room for a binder's copy
// of 10,000 PVs (about 1.3 MiB per 1,000; past ~23,000 the binder drops its
// copy and lists instead, unless NODE_OPTIONS gives it a larger old generation).
// The price is more collection work, 15-20 % of the burst's throughput on a
// 2-core machine where every process shares the cores.
export const FUNCTION_NODE_OPTIONS = "--max-semi-space-size=2 --max-old-space-size=64";
