// The provisioner's watched copies of every Node and CSINode (see
// NodeTopologyCopies in load-request.ts for what they are read for). Each
// keeps only what topology reads (a Node's labels, not its image list and
// conditions), so the copy of a large cluster stays small (bench/README.md).
// Started by the first claim that needs them, so a process that never
// provisions a topology-aware volume watches nothing.
import type { KubeConfig } from "@kubernetes/client-node";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { csiNodes, nodes } from "../../kube/resources.ts";
import type { CSINode, KubeObject, Node } from "../../kube/types.ts";
import { lazyWatchedStore } from "../../kube/watched-store.ts";
import type { Logger } from "../../log.ts";
import type { NodeTopologyCopies } from "./load-request.ts";

/** What a copy keeps of any object: identity and the revision the store orders changes by. */
function identityOf(object: KubeObject): KubeObject {
  const { name, namespace, uid, resourceVersion } = object.metadata;
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    metadata: {
      name,
      ...(namespace !== undefined ? { namespace } : {}),
      ...(uid !== undefined ? { uid } : {}),
      ...(resourceVersion !== undefined ? { resourceVersion } : {}),
    },
  };
}

/** A Node as topology reads it: its labels. */
export function nodeLabelsOnly(node: Node): Node {
  const kept = identityOf(node);
  const labels = node.metadata.labels;
  return labels === undefined ? kept : { ...kept, metadata: { ...kept.metadata, labels } };
}

/** A CSINode as topology reads it: each driver's name, node ID and topology keys. */
export function csiNodeDriversOnly(csiNode: CSINode): CSINode {
  return {
    ...identityOf(csiNode),
    spec: {
      drivers: (csiNode.spec?.drivers ?? []).map(({ name, nodeID, topologyKeys }) => ({
        name,
        nodeID,
        ...(topologyKeys !== undefined ? { topologyKeys } : {}),
      })),
    },
  };
}

interface TopologyCopiesOptions {
  kubeConfig: KubeConfig;
  json: KubeJsonClient;
  log: Logger;
}

/** `get` starts both copies on its first call and returns the same ones after; `stop` ends them if started. */
export function lazyTopologyCopies(options: TopologyCopiesOptions): {
  get: () => NodeTopologyCopies;
  stop: () => Promise<void>;
} {
  // What is kept measures well under bytesPerObject: names, labels, short strings.
  const shared = { kubeConfig: options.kubeConfig, json: options.json, bytesPerObject: 1024 };
  const nodeCopy = lazyWatchedStore<Node>({
    ...shared,
    resource: nodes,
    log: options.log.child({ cache: "nodes" }),
    keep: nodeLabelsOnly,
  });
  const csiNodeCopy = lazyWatchedStore<CSINode>({
    ...shared,
    resource: csiNodes,
    log: options.log.child({ cache: "csinodes" }),
    keep: csiNodeDriversOnly,
  });
  let both: NodeTopologyCopies | undefined;
  return {
    get: () => {
      both ??= { nodes: nodeCopy.get(), csiNodes: csiNodeCopy.get() };
      return both;
    },
    stop: async () => {
      await Promise.all([nodeCopy.stop(), csiNodeCopy.stop()]);
    },
  };
}

/** How long after the copies started a sync still waits for their first lists rather than listing itself. */
const FIRST_SYNC_WINDOW_MS = 2000;

/** Every Node and CSINode: from the copies once both are synced, else listed. */
export async function nodesAndCsiNodes(
  kube: KubeJsonClient,
  copies: NodeTopologyCopies | undefined,
): Promise<[readonly Node[], readonly CSINode[]]> {
  if (copies) {
    await Promise.all([
      copies.nodes.whenSynced(FIRST_SYNC_WINDOW_MS),
      copies.csiNodes.whenSynced(FIRST_SYNC_WINDOW_MS),
    ]);
    // Observed: both copies synced, asked in the turn that reads them (a copy dropped meanwhile
    // is empty, which is not "no nodes"): read them.
    if (copies.nodes.synced && copies.csiNodes.synced)
      return [copies.nodes.store.items(), copies.csiNodes.store.items()];
  }
  // No copies, or not synced in time, or dropped to spare the heap: list both.
  return Promise.all([
    kube.list<Node>(nodes).then((l) => l.items),
    kube.list<CSINode>(csiNodes).then((l) => l.items),
  ]);
}
