// The attacher's decisions as tables: which handler a driver gets, what goes
// into ControllerPublishVolume (readonly, the one access mode, capability),
// the finalizer name, attach/detach decisions of both handlers, the PV
// finalizer rules, the patches and status it writes, backoff, and the
// ListVolumes comparison.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { resolveSource, sourceErrors } from "../../shared/attacher/attachment-source.ts";
import {
  attachedStatus,
  detachedStatus,
  volumeError,
  withAttachError,
} from "../../shared/attacher/attachment-status.ts";
import {
  backoffUntil,
  retryDelaySeconds,
  withFailure,
  withoutBackoff,
} from "../../shared/attacher/backoff.ts";
import { chooseHandler } from "../../shared/attacher/choose-handler.ts";
import {
  annAttachFailures,
  annAttachRetryAfter,
  annDetachFailures,
  annDetachRetryAfter,
  annNodeId,
} from "../../shared/attacher/constants.ts";
import { attacherFinalizer, sanitizeDriverName } from "../../shared/attacher/finalizer-name.ts";
import type { AttachHandler, AttachmentDecision, VolumeDecision } from "../../shared/attacher/handler.ts";
import { nodeIdFor } from "../../shared/attacher/node-id.ts";
import {
  addVolumeFinalizerPatch,
  prepareAttachmentPatch,
  releaseAttachmentPatch,
  removeVolumeFinalizerPatch,
} from "../../shared/attacher/patches.ts";
import {
  buildPublishRequest,
  buildUnpublishRequest,
  volumeCapabilityFor,
} from "../../shared/attacher/publish-request.ts";
import { findAttachmentMismatches, publishedNodesByVolume } from "../../shared/attacher/reconcile.ts";
import { type CsiCapabilities, capabilitiesFrom } from "../../shared/csi/capabilities.ts";
import type { ControllerRpcType } from "../../shared/csi/types.ts";
import type { CSINode, PersistentVolume, VolumeAttachment } from "../../shared/kube/types.ts";

const driver = "hostpath.csi.k8s.io";
const finalizer = "external-attacher/hostpath-csi-k8s-io";
const now = new Date("2026-01-01T00:00:00Z");

function caps(controllerService: boolean, rpcs: ControllerRpcType[]): CsiCapabilities {
  return capabilitiesFrom(
    controllerService ? [{ service: { type: "CONTROLLER_SERVICE" } }] : [],
    rpcs.map((type) => ({ rpc: { type } })),
  );
}

const csiHandler = chooseHandler(
  caps(true, ["PUBLISH_UNPUBLISH_VOLUME", "LIST_VOLUMES", "LIST_VOLUMES_PUBLISHED_NODES"]),
  { driverName: driver },
);
const trivialHandler = chooseHandler(caps(true, ["CREATE_DELETE_VOLUME"]), { driverName: driver });

function va(
  opts: {
    name?: string;
    attacher?: string;
    pv?: string | null;
    inline?: Record<string, unknown>;
    attached?: boolean;
    deleting?: boolean;
    finalizers?: string[];
    annotations?: Record<string, string>;
    status?: VolumeAttachment["status"];
    node?: string;
  } = {},
): VolumeAttachment {
  const pvName = opts.pv === undefined ? "pv-1" : opts.pv;
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: {
      name: opts.name ?? "va-1",
      resourceVersion: "7",
      ...(opts.finalizers ? { finalizers: opts.finalizers } : {}),
      ...(opts.annotations ? { annotations: opts.annotations } : {}),
      ...(opts.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: {
      attacher: opts.attacher ?? driver,
      nodeName: opts.node ?? "node-1",
      source: {
        ...(pvName !== null ? { persistentVolumeName: pvName } : {}),
        ...(opts.inline ? { inlineVolumeSpec: opts.inline } : {}),
      },
    },
    ...(opts.status
      ? { status: opts.status }
      : opts.attached !== undefined
        ? { status: { attached: opts.attached } }
        : {}),
  };
}

function pv(
  opts: {
    name?: string;
    modes?: string[];
    block?: boolean;
    fsType?: string;
    readOnly?: boolean;
    deleting?: boolean;
    finalizers?: string[];
    csi?: boolean;
    mountOptions?: string[];
  } = {},
): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: opts.name ?? "pv-1",
      resourceVersion: "42",
      ...(opts.finalizers ? { finalizers: opts.finalizers } : {}),
      ...(opts.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: {
      accessModes: opts.modes ?? ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      ...(opts.block ? { volumeMode: "Block" } : {}),
      ...(opts.mountOptions ? { mountOptions: opts.mountOptions } : {}),
      ...(opts.csi === false
        ? { hostPath: { path: "/tmp" } }
        : {
            csi: {
              driver,
              volumeHandle: "vol-1",
              ...(opts.fsType !== undefined ? { fsType: opts.fsType } : {}),
              ...(opts.readOnly !== undefined ? { readOnly: opts.readOnly } : {}),
              volumeAttributes: { tier: "gold" },
            },
          }),
    },
  };
}

function csiNode(drivers: { name: string; nodeID: string }[], name = "node-1"): CSINode {
  return { apiVersion: "storage.k8s.io/v1", kind: "CSINode", metadata: { name }, spec: { drivers } };
}

describe("handler choice (cmd/csi-attacher/main.go)", () => {
  const table: {
    name: string;
    controllerService: boolean;
    rpcs: ControllerRpcType[];
    kind: AttachHandler["kind"];
    readonly?: boolean;
    reconciles?: boolean;
  }[] = [
    {
      name: "no controller service",
      controllerService: false,
      rpcs: ["PUBLISH_UNPUBLISH_VOLUME"],
      kind: "trivial",
    },
    {
      name: "controller without PUBLISH_UNPUBLISH_VOLUME",
      controllerService: true,
      rpcs: ["CREATE_DELETE_VOLUME"],
      kind: "trivial",
    },
    {
      name: "PUBLISH_UNPUBLISH_VOLUME",
      controllerService: true,
      rpcs: ["PUBLISH_UNPUBLISH_VOLUME"],
      kind: "csi",
      readonly: false,
      reconciles: false,
    },
    {
      name: "with PUBLISH_READONLY",
      controllerService: true,
      rpcs: ["PUBLISH_UNPUBLISH_VOLUME", "PUBLISH_READONLY"],
      kind: "csi",
      readonly: true,
      reconciles: false,
    },
    {
      name: "LIST_VOLUMES alone does not reconcile",
      controllerService: true,
      rpcs: ["PUBLISH_UNPUBLISH_VOLUME", "LIST_VOLUMES"],
      kind: "csi",
      reconciles: false,
    },
    {
      name: "LIST_VOLUMES + LIST_VOLUMES_PUBLISHED_NODES reconcile",
      controllerService: true,
      rpcs: ["PUBLISH_UNPUBLISH_VOLUME", "LIST_VOLUMES", "LIST_VOLUMES_PUBLISHED_NODES"],
      kind: "csi",
      reconciles: true,
    },
  ];
  for (const t of table) {
    it(t.name, () => {
      const h = chooseHandler(caps(t.controllerService, t.rpcs), { driverName: driver });
      assert.equal(h.kind, t.kind);
      assert.equal(h.finalizer, t.kind === "csi" ? finalizer : undefined);
      if (t.readonly !== undefined) assert.equal(h.publish.publishReadonly, t.readonly);
      if (t.reconciles !== undefined) assert.equal(h.reconciles, t.reconciles);
    });
  }
  it("passes the default fsType and SINGLE_NODE_MULTI_WRITER on", () => {
    const h = chooseHandler(caps(true, ["PUBLISH_UNPUBLISH_VOLUME", "SINGLE_NODE_MULTI_WRITER"]), {
      driverName: driver,
      defaultFsType: "xfs",
    });
    assert.deepEqual(h.publish, {
      publishReadonly: false,
      singleNodeMultiWriter: true,
      defaultFsType: "xfs",
    });
  });
});

describe("finalizer name (SanitizeDriverName)", () => {
  const table: [string, string][] = [
    ["hostpath.csi.k8s.io", "hostpath-csi-k8s-io"],
    ["csi/driver_v2", "csi-driver-v2"],
    ["Driver-A", "Driver-A"],
    ["driver.", "driver-X"],
    ["driver-", "driver-X"],
    ["", "X"],
  ];
  for (const [input, want] of table) {
    it(`${JSON.stringify(input)} -> ${want}`, () => {
      assert.equal(sanitizeDriverName(input), want);
      assert.equal(attacherFinalizer(input), `external-attacher/${want}`);
    });
  }
});

describe("readonly pass-through", () => {
  const table: { publishReadonly: boolean; readOnly: boolean | undefined; want: boolean }[] = [
    { publishReadonly: true, readOnly: true, want: true },
    { publishReadonly: true, readOnly: false, want: false },
    { publishReadonly: true, readOnly: undefined, want: false },
    { publishReadonly: false, readOnly: true, want: false },
    { publishReadonly: false, readOnly: false, want: false },
  ];
  for (const t of table) {
    it(`PUBLISH_READONLY ${t.publishReadonly}, PV readOnly ${t.readOnly} -> ${t.want}`, () => {
      const v = pv(t.readOnly === undefined ? {} : { readOnly: t.readOnly });
      const capability = volumeCapabilityFor(v.spec, v.spec.csi!, {
        singleNodeMultiWriter: false,
        defaultFsType: "",
      });
      assert.ok(capability.ok);
      const request = buildPublishRequest({
        csi: v.spec.csi!,
        capability: capability.value,
        nodeId: "n1",
        secrets: undefined,
        publishReadonly: t.publishReadonly,
      });
      assert.equal(request.readonly, t.want);
    });
  }
});

describe("access mode: one CSI mode from all PV modes", () => {
  const table: { modes: string[]; snmw?: boolean; want?: string; error?: RegExp }[] = [
    { modes: ["ReadWriteOnce"], want: "SINGLE_NODE_WRITER" },
    { modes: ["ReadWriteOnce"], snmw: true, want: "SINGLE_NODE_MULTI_WRITER" },
    { modes: ["ReadOnlyMany"], want: "MULTI_NODE_READER_ONLY" },
    { modes: ["ReadWriteMany"], want: "MULTI_NODE_MULTI_WRITER" },
    { modes: ["ReadWriteMany", "ReadWriteOnce", "ReadOnlyMany"], want: "MULTI_NODE_MULTI_WRITER" },
    { modes: ["ReadWriteOncePod"], want: "SINGLE_NODE_WRITER" },
    { modes: ["ReadWriteOncePod"], snmw: true, want: "SINGLE_NODE_SINGLE_WRITER" },
    {
      modes: ["ReadOnlyMany", "ReadWriteOnce"],
      error: /CSI does not support ReadOnlyMany and ReadWriteOnce/,
    },
    { modes: ["ReadWriteOncePod", "ReadWriteOnce"], error: /ReadWriteOncePod with other access modes/ },
    { modes: [], error: /unsupported AccessMode combination/ },
  ];
  for (const t of table) {
    it(`[${t.modes.join(" ")}]${t.snmw ? " with SNMW" : ""} -> ${t.want ?? "error"}`, () => {
      const v = pv({ modes: t.modes });
      const r = volumeCapabilityFor(v.spec, v.spec.csi!, {
        singleNodeMultiWriter: t.snmw ?? false,
        defaultFsType: "",
      });
      if (t.error) {
        assert.equal(r.ok, false);
        assert.match(r.ok ? "" : r.error, t.error);
      } else {
        assert.ok(r.ok);
        assert.equal(r.value.accessMode?.mode, t.want);
      }
    });
  }
});

describe("publish capability and requests", () => {
  it("mount with the PV's fsType and mount options", () => {
    const v = pv({ fsType: "ext4", mountOptions: ["noatime"] });
    const r = volumeCapabilityFor(v.spec, v.spec.csi!, {
      singleNodeMultiWriter: false,
      defaultFsType: "xfs",
    });
    assert.deepEqual(r, {
      ok: true,
      value: {
        mount: { fsType: "ext4", mountFlags: ["noatime"] },
        accessMode: { mode: "SINGLE_NODE_WRITER" },
      },
    });
  });
  it('mount with the default fsType when the PV names none ("" stays "")', () => {
    const v = pv();
    const withDefault = volumeCapabilityFor(v.spec, v.spec.csi!, {
      singleNodeMultiWriter: false,
      defaultFsType: "xfs",
    });
    const without = volumeCapabilityFor(v.spec, v.spec.csi!, {
      singleNodeMultiWriter: false,
      defaultFsType: "",
    });
    assert.equal(withDefault.ok && withDefault.value.mount?.fsType, "xfs");
    assert.equal(without.ok && without.value.mount?.fsType, "");
  });
  it("block for volumeMode Block", () => {
    const v = pv({ block: true, fsType: "ext4" });
    const r = volumeCapabilityFor(v.spec, v.spec.csi!, { singleNodeMultiWriter: false, defaultFsType: "" });
    assert.deepEqual(r, { ok: true, value: { block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } } });
  });
  it("ControllerPublishVolume carries handle, node, secrets and volume attributes; unpublish handle, node, secrets", () => {
    const v = pv();
    const capability = {
      mount: { fsType: "", mountFlags: [] },
      accessMode: { mode: "SINGLE_NODE_WRITER" as const },
    };
    assert.deepEqual(
      buildPublishRequest({
        csi: v.spec.csi!,
        capability,
        nodeId: "n1",
        secrets: { k: "v" },
        publishReadonly: true,
      }),
      {
        volumeId: "vol-1",
        nodeId: "n1",
        volumeCapability: capability,
        readonly: false,
        secrets: { k: "v" },
        volumeContext: { tier: "gold" },
      },
    );
    assert.deepEqual(buildUnpublishRequest({ csi: v.spec.csi!, nodeId: "n1", secrets: undefined }), {
      volumeId: "vol-1",
      nodeId: "n1",
    });
  });
});

describe("attachment source", () => {
  const inlineCsi = { accessModes: ["ReadWriteOnce"], csi: { driver, volumeHandle: "inline-1" } };
  const table: {
    name: string;
    va: VolumeAttachment;
    pv?: PersistentVolume;
    forAttach?: boolean;
    error?: string;
    handle?: string;
  }[] = [
    { name: "both set", va: va({ inline: inlineCsi }), pv: pv(), error: sourceErrors.both },
    { name: "neither set", va: va({ pv: null }), error: sourceErrors.neither },
    { name: "PV missing", va: va(), error: 'persistentvolume "pv-1" not found' },
    {
      name: "PV being deleted, attach",
      va: va(),
      pv: pv({ deleting: true }),
      error: 'PersistentVolume "pv-1" is marked for deletion',
    },
    {
      name: "PV being deleted, detach",
      va: va(),
      pv: pv({ deleting: true }),
      forAttach: false,
      handle: "vol-1",
    },
    { name: "PV not CSI", va: va(), pv: pv({ csi: false }), error: sourceErrors.notCsi },
    {
      name: "inline without CSI",
      va: va({ pv: null, inline: { accessModes: ["ReadWriteOnce"] } }),
      error: sourceErrors.inlineWithoutCsi,
    },
    { name: "inline CSI", va: va({ pv: null, inline: inlineCsi }), handle: "inline-1" },
    { name: "PV CSI", va: va(), pv: pv(), handle: "vol-1" },
  ];
  for (const t of table) {
    it(t.name, () => {
      const r = resolveSource(t.va, t.pv, { forAttach: t.forAttach ?? true });
      if (t.error) assert.deepEqual(r, { ok: false, error: t.error });
      else {
        assert.ok(r.ok);
        assert.equal(r.csi.volumeHandle, t.handle);
      }
    });
  }
});

describe("node id (getNodeID)", () => {
  const withAnnotation = va({ annotations: { [annNodeId]: "recorded-id" } });
  const table: {
    name: string;
    node: CSINode | undefined;
    fallback?: VolumeAttachment;
    want?: string;
    error?: string;
  }[] = [
    {
      name: "from the CSINode",
      node: csiNode([{ name: driver, nodeID: "id-1" }]),
      fallback: withAnnotation,
      want: "id-1",
    },
    {
      name: "CSINode without the driver, attach",
      node: csiNode([{ name: "other", nodeID: "x" }]),
      error: `CSINode node-1 does not contain driver ${driver}`,
    },
    { name: "CSINode missing, attach", node: undefined, error: 'csinode.storage.k8s.io "node-1" not found' },
    {
      name: "CSINode missing, detach falls back to the annotation",
      node: undefined,
      fallback: withAnnotation,
      want: "recorded-id",
    },
    {
      name: "CSINode without the driver, detach falls back to the annotation",
      node: csiNode([]),
      fallback: withAnnotation,
      want: "recorded-id",
    },
    {
      name: "no CSINode and no annotation",
      node: undefined,
      fallback: va(),
      error: 'csinode.storage.k8s.io "node-1" not found',
    },
  ];
  for (const t of table) {
    it(t.name, () => {
      const r = nodeIdFor(driver, "node-1", t.node, t.fallback);
      assert.deepEqual(r, t.want ? { ok: true, nodeId: t.want } : { ok: false, error: t.error });
    });
  }
});

describe("CSI handler: attach and detach decisions", () => {
  const future = "2026-01-01T00:00:30Z";
  const past = "2025-12-31T23:59:00Z";
  const table: { name: string; va: VolumeAttachment; force?: boolean; want: AttachmentDecision }[] = [
    {
      name: "another driver's attachment",
      va: va({ attacher: "other.csi" }),
      want: { action: "ignore", reason: `attacher is other.csi, not ${driver}` },
    },
    { name: "new attachment", va: va(), want: { action: "attach", forced: false } },
    {
      name: "attach failed before, backoff over",
      va: va({ attached: false, annotations: { [annAttachRetryAfter]: past } }),
      want: { action: "attach", forced: false },
    },
    {
      name: "already attached",
      va: va({ attached: true, finalizers: [finalizer] }),
      want: { action: "ignore", reason: "already attached" },
    },
    {
      name: "attached, but the driver lost it (forced)",
      va: va({ attached: true, finalizers: [finalizer] }),
      force: true,
      want: { action: "attach", forced: true },
    },
    {
      name: "attach failed, backing off",
      va: va({ attached: false, annotations: { [annAttachRetryAfter]: future } }),
      want: { action: "backoff", until: future },
    },
    {
      name: "attach backoff does not hold a forced attach",
      va: va({ attached: false, annotations: { [annAttachRetryAfter]: future } }),
      force: true,
      want: { action: "attach", forced: true },
    },
    {
      name: "a detach backoff does not hold an attach",
      va: va({ annotations: { [annDetachRetryAfter]: future } }),
      want: { action: "attach", forced: false },
    },
    {
      name: "deleted with our finalizer",
      va: va({ deleting: true, attached: true, finalizers: [finalizer] }),
      want: { action: "detach", forced: false },
    },
    {
      name: "deleted, detach failed, backing off",
      va: va({
        deleting: true,
        attached: true,
        finalizers: [finalizer],
        annotations: { [annDetachRetryAfter]: future },
      }),
      want: { action: "backoff", until: future },
    },
    {
      name: "deleted: an attach backoff does not hold the detach",
      va: va({
        deleting: true,
        attached: false,
        finalizers: [finalizer],
        annotations: { [annAttachRetryAfter]: future },
      }),
      want: { action: "detach", forced: false },
    },
    {
      name: "deleted, never attached (no finalizer)",
      va: va({ deleting: true, finalizers: ["other"] }),
      want: { action: "ignore", reason: "already detached" },
    },
    {
      name: "deleted, finalizer gone but status still attached",
      va: va({ deleting: true, attached: true, finalizers: ["other"] }),
      want: { action: "mark-detached", reason: "unpublished; status not yet written" },
    },
    {
      name: "deleted without our finalizer, but the driver still lists it (forced)",
      va: va({ deleting: true, attached: false, finalizers: ["other"] }),
      force: true,
      want: { action: "detach", forced: true },
    },
  ];
  for (const t of table) {
    it(t.name, () => {
      assert.deepEqual(
        csiHandler.decideAttachment(t.va, { now, ...(t.force ? { force: true } : {}) }),
        t.want,
      );
    });
  }
});

describe("trivial handler decisions", () => {
  const table: { name: string; va: VolumeAttachment; want: AttachmentDecision }[] = [
    { name: "new attachment", va: va(), want: { action: "mark-attached" } },
    { name: "status attached=false", va: va({ attached: false }), want: { action: "mark-attached" } },
    {
      name: "already attached",
      va: va({ attached: true }),
      want: { action: "ignore", reason: "already attached" },
    },
    {
      name: "being deleted",
      va: va({ deleting: true }),
      want: { action: "ignore", reason: "being deleted; nothing to detach" },
    },
    {
      name: "another driver's",
      va: va({ attacher: "x" }),
      want: { action: "ignore", reason: `attacher is x, not ${driver}` },
    },
  ];
  for (const t of table) {
    it(t.name, () => assert.deepEqual(trivialHandler.decideAttachment(t.va, { now, force: true }), t.want));
  }
  it("keeps no PV finalizer", () => {
    assert.equal(
      trivialHandler.decideVolume(pv({ deleting: true, finalizers: [finalizer] }), []).action,
      "ignore",
    );
  });
});

describe("PV finalizer removal", () => {
  const table: {
    name: string;
    pv: PersistentVolume;
    attachments: VolumeAttachment[];
    want: VolumeDecision;
  }[] = [
    {
      name: "no attacher finalizer",
      pv: pv({ deleting: true }),
      attachments: [],
      want: { action: "ignore", reason: "no attacher finalizer" },
    },
    {
      name: "not being deleted (the finalizer stays after detach)",
      pv: pv({ finalizers: [finalizer] }),
      attachments: [],
      want: { action: "ignore", reason: "not being deleted" },
    },
    {
      name: "being deleted, still referenced by an attachment",
      pv: pv({ deleting: true, finalizers: [finalizer] }),
      attachments: [va({ name: "va-x", deleting: true })],
      want: { action: "ignore", reason: "still needed by VolumeAttachment va-x" },
    },
    {
      name: "being deleted, referenced by another driver's attachment",
      pv: pv({ deleting: true, finalizers: [finalizer] }),
      attachments: [va({ name: "va-y", attacher: "other.csi" })],
      want: { action: "ignore", reason: "still needed by VolumeAttachment va-y" },
    },
    {
      name: "being deleted, attachments of other PVs only",
      pv: pv({ deleting: true, finalizers: ["kubernetes.io/pv-protection", finalizer] }),
      attachments: [va({ pv: "pv-2" }), va({ pv: null, inline: { csi: { driver, volumeHandle: "x" } } })],
      want: { action: "remove-finalizer" },
    },
  ];
  for (const t of table) {
    it(t.name, () => assert.deepEqual(csiHandler.decideVolume(t.pv, t.attachments), t.want));
  }
});

describe("patches", () => {
  it("one strategic merge patch adds the VA finalizer (to the stored list, whatever the copy says) and the node id, conditional on resourceVersion", () => {
    assert.deepEqual(prepareAttachmentPatch(va({ finalizers: ["a"] }), finalizer, "id-1"), {
      metadata: { resourceVersion: "7", finalizers: [finalizer], annotations: { [annNodeId]: "id-1" } },
    });
    assert.deepEqual(prepareAttachmentPatch(va({ finalizers: [finalizer] }), finalizer, "id-1"), {
      metadata: { resourceVersion: "7", annotations: { [annNodeId]: "id-1" } },
    });
    assert.equal(
      prepareAttachmentPatch(
        va({ finalizers: [finalizer], annotations: { [annNodeId]: "id-1" } }),
        finalizer,
        "id-1",
      ),
      undefined,
    );
  });
  it("releasing the VA keeps other finalizers and drops backoff annotations", () => {
    const held = va({
      finalizers: ["a", finalizer],
      annotations: { [annDetachFailures]: "2", [annDetachRetryAfter]: "x" },
    });
    assert.deepEqual(releaseAttachmentPatch(held, finalizer), {
      metadata: {
        resourceVersion: "7",
        finalizers: ["a"],
        annotations: { [annDetachFailures]: null, [annDetachRetryAfter]: null },
      },
    });
    assert.deepEqual(releaseAttachmentPatch(va({ finalizers: [finalizer] }), finalizer), {
      metadata: { resourceVersion: "7", finalizers: null },
    });
    assert.equal(releaseAttachmentPatch(va(), finalizer), undefined);
  });
  it("PV finalizer add and remove are JSON Patches that test the resourceVersion", () => {
    assert.deepEqual(addVolumeFinalizerPatch(pv(), finalizer), [
      { op: "test", path: "/metadata/resourceVersion", value: "42" },
      { op: "add", path: "/metadata/finalizers", value: [finalizer] },
    ]);
    assert.deepEqual(addVolumeFinalizerPatch(pv({ finalizers: ["x"] }), finalizer), [
      { op: "test", path: "/metadata/resourceVersion", value: "42" },
      { op: "add", path: "/metadata/finalizers/-", value: finalizer },
    ]);
    assert.equal(addVolumeFinalizerPatch(pv({ finalizers: [finalizer] }), finalizer), undefined);
    assert.deepEqual(removeVolumeFinalizerPatch(pv({ finalizers: ["x", finalizer] }), finalizer), [
      { op: "test", path: "/metadata/resourceVersion", value: "42" },
      { op: "test", path: "/metadata/finalizers/1", value: finalizer },
      { op: "remove", path: "/metadata/finalizers/1" },
    ]);
    assert.equal(removeVolumeFinalizerPatch(pv({ finalizers: ["x"] }), finalizer), undefined);
  });
});

describe("status (markAsAttached, saveAttachError, markAsDetached)", () => {
  const failed = withAttachError(
    { attached: false },
    volumeError("rpc error: code = Internal desc = boom", now, 13),
  );
  it("an attach error carries time, message and the gRPC code", () => {
    assert.deepEqual(failed, {
      attached: false,
      attachError: {
        time: "2026-01-01T00:00:00Z",
        message: "rpc error: code = Internal desc = boom",
        errorCode: 13,
      },
    });
    assert.deepEqual(volumeError("not grpc", now), { time: "2026-01-01T00:00:00Z", message: "not grpc" });
  });
  it("a driver's error longer than kube-apiserver's 1024-byte limit is cut to fit, on a character boundary", () => {
    const long = volumeError(`rpc error: ${"é".repeat(2000)}`, now).message ?? "";
    assert.ok(Buffer.byteLength(long) <= 1024, String(Buffer.byteLength(long)));
    assert.ok(long.startsWith("rpc error: é") && long.endsWith("é..."));
    const exact = "x".repeat(1024);
    assert.equal(volumeError(exact, now).message, exact);
  });
  it("attached: metadata set, attach error cleared; an empty publish_context is omitted", () => {
    assert.deepEqual(attachedStatus(failed, { devicePath: "/dev/x" }), {
      attached: true,
      attachmentMetadata: { devicePath: "/dev/x" },
    });
    assert.deepEqual(attachedStatus({ attached: false, attachmentMetadata: { old: "1" } }, {}), {
      attached: true,
    });
    assert.deepEqual(attachedStatus(undefined, undefined), { attached: true });
  });
  it("detached: attached=false, metadata and detach error cleared, the last attach error kept (as upstream)", () => {
    assert.deepEqual(
      detachedStatus({
        attached: true,
        attachmentMetadata: { a: "b" },
        detachError: { message: "x" },
        attachError: { message: "old" },
      }),
      { attached: false, attachError: { message: "old" } },
    );
  });
});

describe("backoff", () => {
  it("1 s doubling to 5 min", () => {
    assert.deepEqual(
      [1, 2, 3, 4, 9, 10, 50].map((n) => retryDelaySeconds(n)),
      [1, 2, 4, 8, 256, 300, 300],
    );
  });
  it("RETRY_INTERVAL_START/MAX_SECONDS change the retry-after written (5 s doubling to 30 s)", () => {
    const interval = { startSeconds: 5, maxSeconds: 30 };
    const first = withFailure(va(), "detach", now, interval);
    assert.equal(first.delaySeconds, 5);
    assert.equal(first.va.metadata.annotations?.[annDetachRetryAfter], "2026-01-01T00:00:05Z");
    let v = first.va;
    for (let i = 0; i < 4; i++) v = withFailure(v, "detach", now, interval).va;
    assert.equal(v.metadata.annotations?.[annDetachRetryAfter], "2026-01-01T00:00:30Z", "capped at the max");
  });
  it("counts failures per operation and holds the operation until retry-after", () => {
    const first = withFailure(va(), "attach", now);
    assert.equal(first.delaySeconds, 1);
    assert.equal(first.va.metadata.annotations?.[annAttachFailures], "1");
    assert.equal(first.va.metadata.annotations?.[annAttachRetryAfter], "2026-01-01T00:00:01Z");
    const third = withFailure(withFailure(first.va, "attach", now).va, "attach", now);
    assert.equal(third.delaySeconds, 4);
    assert.equal(backoffUntil(third.va, "attach", now), "2026-01-01T00:00:04Z");
    assert.equal(backoffUntil(third.va, "attach", new Date("2026-01-01T00:00:04Z")), undefined);
    assert.equal(backoffUntil(third.va, "detach", now), undefined);
    const detach = withFailure(third.va, "detach", now);
    assert.equal(detach.delaySeconds, 1, "a detach starts its own count");
    assert.deepEqual(withoutBackoff(detach.va).metadata.annotations, {});
  });
});

describe("ListVolumes reconcile", () => {
  const nodes = new Map([["node-1", csiNode([{ name: driver, nodeID: "id-1" }])]]);
  const volumes = new Map([
    ["pv-1", pv()],
    ["pv-2", { ...pv({ name: "pv-2" }), spec: { ...pv().spec, csi: { driver, volumeHandle: "vol-2" } } }],
  ]);
  it("published node ids by volume id, across pages", () => {
    const map = publishedNodesByVolume([
      {
        volume: { volumeId: "a", capacityBytes: 0n, volumeContext: {}, accessibleTopology: [] },
        status: { publishedNodeIds: ["n"] },
      },
      { volume: { volumeId: "b", capacityBytes: 0n, volumeContext: {}, accessibleTopology: [] } },
    ]);
    assert.deepEqual(
      [...map],
      [
        ["a", ["n"]],
        ["b", []],
      ],
    );
  });
  it("finds attachments whose status the driver contradicts, and only this driver's", () => {
    const attachments = [
      va({ name: "ok-attached", attached: true }),
      va({ name: "lost", pv: "pv-2", attached: true }),
      va({ name: "ok-pending", pv: "pv-2", attached: false }),
      va({ name: "other", attacher: "other.csi", attached: false }),
      va({ name: "no-node", node: "gone", attached: true }),
      va({ name: "no-pv", pv: "missing", attached: true }),
    ];
    const found = findAttachmentMismatches({
      driverName: driver,
      attachments,
      volumes,
      csiNodes: nodes,
      published: new Map([["vol-1", ["id-1"]]]),
    });
    assert.deepEqual(
      found.map((m) => [m.name, m.attached, m.published]),
      [["lost", true, false]],
    );
    const completed = findAttachmentMismatches({
      driverName: driver,
      attachments: [va({ name: "done-but-unrecorded", attached: false })],
      volumes,
      csiNodes: nodes,
      published: new Map([["vol-1", ["id-1"]]]),
    });
    assert.deepEqual(
      completed.map((m) => [m.name, m.attached, m.published, m.nodeId]),
      [["done-but-unrecorded", false, true, "id-1"]],
    );
  });
});

describe("attacher: the attach/detach lock fences single-node volumes", () => {
  const lockKey = "attachdetach.kube-storage-functions.io/node";
  const pvWith = (modes: string[], lock?: string): PersistentVolume => ({
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "pv1", ...(lock ? { annotations: { [lockKey]: lock } } : {}) },
    spec: { accessModes: modes, csi: { driver: "hostpath.csi.k8s.io", volumeHandle: "h1" } },
  });
  const vaOn = (node: string): VolumeAttachment => ({
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: `va-${node}` },
    spec: { attacher: "hostpath.csi.k8s.io", nodeName: node, source: { persistentVolumeName: "pv1" } },
  });
  it("refuses to attach an RWO volume reserved for another node; allows its own node, RWX, unlocked, and detach", () => {
    const refused = resolveSource(vaOn("node-b"), pvWith(["ReadWriteOnce"], "node-a"), { forAttach: true });
    assert.deepEqual(refused, { ok: false, error: sourceErrors.reservedElsewhere("pv1", "node-a") });
    assert.ok(resolveSource(vaOn("node-a"), pvWith(["ReadWriteOnce"], "node-a"), { forAttach: true }).ok);
    assert.ok(resolveSource(vaOn("node-b"), pvWith(["ReadWriteMany"], "node-a"), { forAttach: true }).ok);
    assert.ok(resolveSource(vaOn("node-b"), pvWith(["ReadWriteOnce"]), { forAttach: true }).ok);
    assert.ok(resolveSource(vaOn("node-b"), pvWith(["ReadWriteOnce"], "node-a"), { forAttach: false }).ok);
  });
});
