// Discovery documents (/api, /apis, /api/v1, /apis/<group>/<version>,
// /version): what kubectl and client libraries read to map kinds to paths.
import { apiGroups, resourceTypes, resourceVerbs } from "./resources.ts";

export const serverVersion = {
  major: "1",
  minor: "30",
  gitVersion: "v1.30.0-kube-storage-functions-sandbox",
  gitCommit: "0000000000000000000000000000000000000000",
  gitTreeState: "clean",
  buildDate: "2026-01-01T00:00:00Z",
  goVersion: "none",
  compiler: "none",
  platform: "linux/amd64",
};

export function coreVersions(serverAddress: string): Record<string, unknown> {
  return {
    kind: "APIVersions",
    versions: ["v1"],
    serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress }],
  };
}

function groupDocument(name: string, version: string): Record<string, unknown> {
  const gv = { groupVersion: `${name}/${version}`, version };
  return { name, versions: [gv], preferredVersion: gv };
}

export function groupList(): Record<string, unknown> {
  return {
    kind: "APIGroupList",
    apiVersion: "v1",
    groups: apiGroups().map((g) => groupDocument(g.name, g.version)),
  };
}

export function group(name: string): Record<string, unknown> | undefined {
  const g = apiGroups().find((x) => x.name === name);
  return g ? { kind: "APIGroup", apiVersion: "v1", ...groupDocument(g.name, g.version) } : undefined;
}

export function resourceList(groupName: string, version: string): Record<string, unknown> | undefined {
  const types = resourceTypes.filter((t) => t.group === groupName && t.version === version);
  if (types.length === 0) return undefined;
  const resources: Record<string, unknown>[] = [];
  for (const t of types) {
    resources.push({
      name: t.plural,
      singularName: t.singular,
      namespaced: t.namespaced,
      kind: t.kind,
      verbs: resourceVerbs,
      ...(t.shortNames.length ? { shortNames: t.shortNames } : {}),
      storageVersionHash: "",
    });
    if (t.hasStatus) {
      resources.push({
        name: `${t.plural}/status`,
        singularName: "",
        namespaced: t.namespaced,
        kind: t.kind,
        verbs: ["get", "patch", "update"],
      });
    }
  }
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: groupName ? `${groupName}/${version}` : version,
    resources,
  };
}
