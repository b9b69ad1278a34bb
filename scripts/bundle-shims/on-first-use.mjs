// What the lazy shims share: a loader that runs once, on first use. Each
// shim keeps its own literal require() so the bundler resolves the real
// package from the shim's file.
export const onFirstUse = (load) => {
  let loaded;
  return () => {
    loaded ??= load();
    return loaded;
  };
};
