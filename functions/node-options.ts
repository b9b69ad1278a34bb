// The V8 flags every function process runs with: the image sets them as
// NODE_OPTIONS (deploy/Dockerfile) and the benches start functions with them,
// so the memory figures are those of what is deployed. Node sizes its heap
// for the machine, not for a function: without limits a busy process lets
// garbage pile up to hundreds of MiB before collecting it. A 1 MiB young
// generation and a 96 MiB old generation keep a function near 128 MiB under a
// burst of 1,000 claims, with room for a binder's copy of 10,000 PVs.
export const FUNCTION_NODE_OPTIONS = "--max-semi-space-size=1 --max-old-space-size=96";
