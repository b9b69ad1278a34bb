// client-node's serializer.js as its ListWatch (cache.js) sees it in the
// function bundles (scripts/build-lambda.ts bundleOptions). ListWatch uses
// ObjectSerializer for one thing: passing its label and field selectors,
// strings, through serialize(value, "string"), which returns them as they
// are. The real module imports every generated model class of the
// Kubernetes API, all evaluated at start, for that alone. Any other use
// fails loudly.
export const ObjectSerializer = {
  serialize(data, type) {
    if (type === "string" && (data === undefined || typeof data === "string")) return data;
    throw new Error(`ObjectSerializer.serialize(${typeof data}, ${type}) is not in the function bundles`);
  },
};
