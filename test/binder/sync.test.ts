// The binder's decisions as tables, case for case with upstream's
// binder_test.go (sets 1-x, 2-x, 3-x, 4-x, 13-x, 14-x, 10-x), plus the
// families upstream tests elsewhere: delayed binding with pods, default
// classes, external provisioning hand-off, reclaim policies.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  annBetaStorageProvisioner,
  annDynamicallyProvisioned,
  annSelectedNode,
  annStorageProvisioner,
  annBindCompleted as bindCompleted,
  annBoundByController as boundByController,
  classEmpty,
  classExternal,
  classGold,
  classSilver,
  classWait,
  mockProvisioner,
  newClaim,
  newVolume,
  pod,
  runMultiSync,
  runSyncCase,
  type SyncCase,
  storageClass,
  withAccessModes,
  withAnnotation,
  withExpectedCapacity,
  withLabelSelector,
  withLabels,
  withoutCsi,
  withReclaimPolicy,
  withVolumeMode,
} from "./framework.ts";

const Available = "Available";
const BoundV = "Bound";
const Pending = "Pending";
const Released = "Released";
const Failed = "Failed";
const Bound = "Bound";
const Lost = "Lost";
const Retain = "Retain";
const Delete = "Delete";
const Recycle = "Recycle";
const labels = { foo: "true", bar: "false" };

const syncCases: SyncCase[] = [
  // [1-x] The user did not ask for a particular volume.
  {
    name: "1-1 - successful bind",
    initialVolumes: [newVolume("volume1-1", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [
      newVolume("volume1-1", "1Gi", "uid1-1", "claim1-1", BoundV, Retain, classEmpty, boundByController),
    ],
    initialClaims: [newClaim("claim1-1", "uid1-1", "1Gi", "", Pending, undefined)],
    expectedClaims: [
      newClaim("claim1-1", "uid1-1", "1Gi", "volume1-1", Bound, undefined, boundByController, bindCompleted),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "1-2 - noop",
    initialVolumes: [newVolume("volume1-2", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume1-2", "1Gi", "", "", Available, Retain, classEmpty)],
    initialClaims: [newClaim("claim1-2", "uid1-2", "10Gi", "", Pending, undefined)],
    expectedClaims: [newClaim("claim1-2", "uid1-2", "10Gi", "", Pending, undefined)],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
  {
    name: "1-3 - reset to Pending",
    initialVolumes: [newVolume("volume1-3", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume1-3", "1Gi", "", "", Available, Retain, classEmpty)],
    initialClaims: [newClaim("claim1-3", "uid1-3", "10Gi", "", Bound, undefined)],
    expectedClaims: [newClaim("claim1-3", "uid1-3", "10Gi", "", Pending, undefined)],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
  {
    name: "1-4 - smallest volume",
    initialVolumes: [
      newVolume("volume1-4_1", "10Gi", "", "", Available, Retain, classEmpty),
      newVolume("volume1-4_2", "1Gi", "", "", Available, Retain, classEmpty),
    ],
    expectedVolumes: [
      newVolume("volume1-4_1", "10Gi", "", "", Available, Retain, classEmpty),
      newVolume("volume1-4_2", "1Gi", "uid1-4", "claim1-4", BoundV, Retain, classEmpty, boundByController),
    ],
    initialClaims: [newClaim("claim1-4", "uid1-4", "1Gi", "", Pending, undefined)],
    expectedClaims: [
      newClaim(
        "claim1-4",
        "uid1-4",
        "1Gi",
        "volume1-4_2",
        Bound,
        undefined,
        boundByController,
        bindCompleted,
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "1-5 - prebound volume by name - success",
    initialVolumes: [
      newVolume("volume1-5_1", "10Gi", "", "claim1-5", Available, Retain, classEmpty),
      newVolume("volume1-5_2", "1Gi", "", "", Available, Retain, classEmpty),
    ],
    expectedVolumes: [
      newVolume("volume1-5_1", "10Gi", "uid1-5", "claim1-5", BoundV, Retain, classEmpty),
      newVolume("volume1-5_2", "1Gi", "", "", Available, Retain, classEmpty),
    ],
    initialClaims: [newClaim("claim1-5", "uid1-5", "1Gi", "", Pending, undefined)],
    expectedClaims: [
      withExpectedCapacity(
        "10Gi",
        newClaim(
          "claim1-5",
          "uid1-5",
          "1Gi",
          "volume1-5_1",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "1-6 - prebound volume by UID - success",
    initialVolumes: [
      newVolume("volume1-6_1", "10Gi", "uid1-6", "claim1-6", Available, Retain, classEmpty),
      newVolume("volume1-6_2", "1Gi", "", "", Available, Retain, classEmpty),
    ],
    expectedVolumes: [
      newVolume("volume1-6_1", "10Gi", "uid1-6", "claim1-6", BoundV, Retain, classEmpty),
      newVolume("volume1-6_2", "1Gi", "", "", Available, Retain, classEmpty),
    ],
    initialClaims: [newClaim("claim1-6", "uid1-6", "1Gi", "", Pending, undefined)],
    expectedClaims: [
      withExpectedCapacity(
        "10Gi",
        newClaim(
          "claim1-6",
          "uid1-6",
          "1Gi",
          "volume1-6_1",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "1-7 - prebound volume to different claim",
    initialVolumes: [newVolume("volume1-7", "10Gi", "uid1-777", "claim1-7", Available, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume1-7", "10Gi", "uid1-777", "claim1-7", Available, Retain, classEmpty)],
    initialClaims: [newClaim("claim1-7", "uid1-7", "1Gi", "", Pending, undefined)],
    expectedClaims: [newClaim("claim1-7", "uid1-7", "1Gi", "", Pending, undefined)],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
  {
    name: "1-8 - complete bind after crash - PV bound",
    initialVolumes: [
      newVolume("volume1-8", "1Gi", "uid1-8", "claim1-8", Available, Retain, classEmpty, boundByController),
    ],
    expectedVolumes: [
      newVolume("volume1-8", "1Gi", "uid1-8", "claim1-8", BoundV, Retain, classEmpty, boundByController),
    ],
    initialClaims: [newClaim("claim1-8", "uid1-8", "1Gi", "", Pending, undefined)],
    expectedClaims: [
      newClaim("claim1-8", "uid1-8", "1Gi", "volume1-8", Bound, undefined, boundByController, bindCompleted),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "1-9 - complete bind after crash - PV status saved",
    initialVolumes: [
      newVolume("volume1-9", "1Gi", "uid1-9", "claim1-9", BoundV, Retain, classEmpty, boundByController),
    ],
    expectedVolumes: [
      newVolume("volume1-9", "1Gi", "uid1-9", "claim1-9", BoundV, Retain, classEmpty, boundByController),
    ],
    initialClaims: [newClaim("claim1-9", "uid1-9", "1Gi", "", Pending, undefined)],
    expectedClaims: [
      newClaim("claim1-9", "uid1-9", "1Gi", "volume1-9", Bound, undefined, boundByController, bindCompleted),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "1-10 - complete bind after crash - PVC bound",
    initialVolumes: [
      newVolume("volume1-10", "1Gi", "uid1-10", "claim1-10", BoundV, Retain, classEmpty, boundByController),
    ],
    expectedVolumes: [
      newVolume("volume1-10", "1Gi", "uid1-10", "claim1-10", BoundV, Retain, classEmpty, boundByController),
    ],
    initialClaims: [
      newClaim(
        "claim1-10",
        "uid1-10",
        "1Gi",
        "volume1-10",
        Pending,
        undefined,
        boundByController,
        bindCompleted,
      ),
    ],
    expectedClaims: [
      newClaim(
        "claim1-10",
        "uid1-10",
        "1Gi",
        "volume1-10",
        Bound,
        undefined,
        boundByController,
        bindCompleted,
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "1-11 - bind when selector matches",
    initialVolumes: [
      withLabels(labels, newVolume("volume1-1", "1Gi", "", "", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withLabels(
        labels,
        newVolume("volume1-1", "1Gi", "uid1-1", "claim1-1", BoundV, Retain, classEmpty, boundByController),
      ),
    ],
    initialClaims: [withLabelSelector(labels, newClaim("claim1-1", "uid1-1", "1Gi", "", Pending, undefined))],
    expectedClaims: [
      withLabelSelector(
        labels,
        newClaim(
          "claim1-1",
          "uid1-1",
          "1Gi",
          "volume1-1",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "1-12 - do not bind when selector does not match",
    initialVolumes: [newVolume("volume1-1", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume1-1", "1Gi", "", "", Available, Retain, classEmpty)],
    initialClaims: [withLabelSelector(labels, newClaim("claim1-1", "uid1-1", "1Gi", "", Pending, undefined))],
    expectedClaims: [
      withLabelSelector(labels, newClaim("claim1-1", "uid1-1", "1Gi", "", Pending, undefined)),
    ],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
  {
    name: "1-13 - delayed binding",
    initialVolumes: [newVolume("volume1-1", "1Gi", "", "", Available, Retain, classWait)],
    expectedVolumes: [newVolume("volume1-1", "1Gi", "", "", Available, Retain, classWait)],
    initialClaims: [newClaim("claim1-1", "uid1-1", "1Gi", "", Pending, classWait)],
    expectedClaims: [newClaim("claim1-1", "uid1-1", "1Gi", "", Pending, classWait)],
    expectedEvents: ["Normal WaitForFirstConsumer"],
    test: "claim",
  },
  {
    name: "1-14 - successful prebound PV",
    initialVolumes: [newVolume("volume1-1", "1Gi", "", "claim1-1", Available, Retain, classWait)],
    expectedVolumes: [newVolume("volume1-1", "1Gi", "uid1-1", "claim1-1", BoundV, Retain, classWait)],
    initialClaims: [newClaim("claim1-1", "uid1-1", "1Gi", "", Pending, classWait)],
    expectedClaims: [
      newClaim("claim1-1", "uid1-1", "1Gi", "volume1-1", Bound, classWait, boundByController, bindCompleted),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "1-15 - successful prebound PVC",
    initialVolumes: [
      newVolume("volume1-15_1", "10Gi", "", "", Available, Retain, classEmpty),
      newVolume("volume1-15_2", "1Gi", "", "", Available, Retain, classEmpty),
    ],
    expectedVolumes: [
      newVolume(
        "volume1-15_1",
        "10Gi",
        "uid1-15",
        "claim1-15",
        BoundV,
        Retain,
        classEmpty,
        boundByController,
      ),
      newVolume("volume1-15_2", "1Gi", "", "", Available, Retain, classEmpty),
    ],
    initialClaims: [newClaim("claim1-15", "uid1-15", "1Gi", "volume1-15_1", Pending, undefined)],
    expectedClaims: [
      withExpectedCapacity(
        "10Gi",
        newClaim("claim1-15", "uid1-15", "1Gi", "volume1-15_1", Bound, undefined, bindCompleted),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "1-16 - prebound PVC, PV with other access modes",
    initialVolumes: [newVolume("volume1-16", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume1-16", "1Gi", "", "", Available, Retain, classEmpty)],
    initialClaims: [
      withAccessModes(
        ["ReadWriteMany"],
        newClaim("claim1-16", "uid1-16", "1Gi", "volume1-16", Pending, undefined),
      ),
    ],
    expectedClaims: [
      withAccessModes(
        ["ReadWriteMany"],
        newClaim("claim1-16", "uid1-16", "1Gi", "volume1-16", Pending, undefined),
      ),
    ],
    expectedEvents: ["Warning VolumeMismatch"],
    test: "claim",
  },
  {
    name: "1-17 - skip non-available PV if it's not pre-bind",
    initialVolumes: [
      newVolume("volume1-17-pending", "1Gi", "", "", Pending, Retain, classEmpty),
      newVolume("volume1-17-failed", "1Gi", "", "", Failed, Retain, classEmpty),
      newVolume("volume1-17-released", "1Gi", "", "", Released, Retain, classEmpty),
      newVolume("volume1-17-empty", "1Gi", "", "", "", Retain, classEmpty),
    ],
    expectedVolumes: [
      newVolume("volume1-17-pending", "1Gi", "", "", Pending, Retain, classEmpty),
      newVolume("volume1-17-failed", "1Gi", "", "", Failed, Retain, classEmpty),
      newVolume("volume1-17-released", "1Gi", "", "", Released, Retain, classEmpty),
      newVolume("volume1-17-empty", "1Gi", "", "", "", Retain, classEmpty),
    ],
    initialClaims: [newClaim("claim1-17", "uid1-17", "1Gi", "", Pending, undefined)],
    expectedClaims: [newClaim("claim1-17", "uid1-17", "1Gi", "", Pending, undefined)],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
  {
    name: "1-18 - successful pre-bound PV to PVC provisioning",
    initialVolumes: [newVolume("volume1-18", "1Gi", "uid1-18", "claim1-18", Available, Retain, classWait)],
    expectedVolumes: [newVolume("volume1-18", "1Gi", "uid1-18", "claim1-18", BoundV, Retain, classWait)],
    initialClaims: [
      withAnnotation(
        annSelectedNode,
        "node1",
        newClaim("claim1-18", "uid1-18", "1Gi", "", Pending, classWait),
      ),
    ],
    expectedClaims: [
      withAnnotation(
        annSelectedNode,
        "node1",
        newClaim(
          "claim1-18",
          "uid1-18",
          "1Gi",
          "volume1-18",
          Bound,
          classWait,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "1-19 - access-mode groups: fewer modes first, even when larger",
    initialVolumes: [
      withAccessModes_v(
        ["ReadWriteOnce"],
        newVolume("volume1-19_rwo", "10Gi", "", "", Available, Retain, classEmpty),
      ),
      newVolume("volume1-19_rwo_rox", "1Gi", "", "", Available, Retain, classEmpty),
    ],
    expectedVolumes: [
      withAccessModes_v(
        ["ReadWriteOnce"],
        newVolume(
          "volume1-19_rwo",
          "10Gi",
          "uid1-19",
          "claim1-19",
          BoundV,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
      newVolume("volume1-19_rwo_rox", "1Gi", "", "", Available, Retain, classEmpty),
    ],
    initialClaims: [
      withAccessModes(["ReadWriteOnce"], newClaim("claim1-19", "uid1-19", "1Gi", "", Pending, undefined)),
    ],
    expectedClaims: [
      withExpectedCapacity(
        "10Gi",
        withAccessModes(["ReadWriteOnce"], {
          ...newClaim(
            "claim1-19",
            "uid1-19",
            "1Gi",
            "volume1-19_rwo",
            Bound,
            undefined,
            boundByController,
            bindCompleted,
          ),
          status: { phase: Bound, accessModes: ["ReadWriteOnce"], capacity: { storage: "10Gi" } },
        }),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "1-20 - volume being deleted is not chosen",
    initialVolumes: [
      {
        ...newVolume("volume1-20", "1Gi", "", "", Available, Retain, classEmpty),
        metadata: { name: "volume1-20", resourceVersion: "1", deletionTimestamp: "2026-01-01T00:00:00Z" },
      },
    ],
    expectedVolumes: [
      {
        ...newVolume("volume1-20", "1Gi", "", "", Available, Retain, classEmpty),
        metadata: { name: "volume1-20", resourceVersion: "1", deletionTimestamp: "2026-01-01T00:00:00Z" },
      },
    ],
    initialClaims: [newClaim("claim1-20", "uid1-20", "1Gi", "", Pending, undefined)],
    expectedClaims: [newClaim("claim1-20", "uid1-20", "1Gi", "", Pending, undefined)],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },

  // [2-x] The user asked for a specific volume.
  {
    name: "2-1 - claim prebound to non-existing volume - noop",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim2-1", "uid2-1", "10Gi", "volume2-1", Pending, undefined)],
    expectedClaims: [newClaim("claim2-1", "uid2-1", "10Gi", "volume2-1", Pending, undefined)],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "2-2 - claim prebound to non-existing volume - reset status",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim2-2", "uid2-2", "10Gi", "volume2-2", Bound, undefined)],
    expectedClaims: [newClaim("claim2-2", "uid2-2", "10Gi", "volume2-2", Pending, undefined)],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "2-3 - claim prebound to unbound volume",
    initialVolumes: [newVolume("volume2-3", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [
      newVolume("volume2-3", "1Gi", "uid2-3", "claim2-3", BoundV, Retain, classEmpty, boundByController),
    ],
    initialClaims: [newClaim("claim2-3", "uid2-3", "1Gi", "volume2-3", Pending, undefined)],
    expectedClaims: [newClaim("claim2-3", "uid2-3", "1Gi", "volume2-3", Bound, undefined, bindCompleted)],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "2-4 - claim prebound to prebound volume by name",
    initialVolumes: [newVolume("volume2-4", "1Gi", "", "claim2-4", Available, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume2-4", "1Gi", "uid2-4", "claim2-4", BoundV, Retain, classEmpty)],
    initialClaims: [newClaim("claim2-4", "uid2-4", "1Gi", "volume2-4", Pending, undefined)],
    expectedClaims: [newClaim("claim2-4", "uid2-4", "1Gi", "volume2-4", Bound, undefined, bindCompleted)],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "2-5 - claim prebound to prebound volume by UID",
    initialVolumes: [newVolume("volume2-5", "1Gi", "uid2-5", "claim2-5", Available, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume2-5", "1Gi", "uid2-5", "claim2-5", BoundV, Retain, classEmpty)],
    initialClaims: [newClaim("claim2-5", "uid2-5", "1Gi", "volume2-5", Pending, undefined)],
    expectedClaims: [newClaim("claim2-5", "uid2-5", "1Gi", "volume2-5", Bound, undefined, bindCompleted)],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "2-6 - claim prebound to already bound volume",
    initialVolumes: [newVolume("volume2-6", "1Gi", "uid2-6_1", "claim2-6_1", BoundV, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume2-6", "1Gi", "uid2-6_1", "claim2-6_1", BoundV, Retain, classEmpty)],
    initialClaims: [newClaim("claim2-6", "uid2-6", "1Gi", "volume2-6", Bound, undefined)],
    expectedClaims: [newClaim("claim2-6", "uid2-6", "1Gi", "volume2-6", Pending, undefined)],
    expectedEvents: ["Warning FailedBinding"],
    test: "claim",
  },
  {
    name: "2-7 - claim bound by controller to already bound volume",
    initialVolumes: [newVolume("volume2-7", "1Gi", "uid2-7_1", "claim2-7_1", BoundV, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume2-7", "1Gi", "uid2-7_1", "claim2-7_1", BoundV, Retain, classEmpty)],
    initialClaims: [newClaim("claim2-7", "uid2-7", "1Gi", "volume2-7", Bound, undefined, boundByController)],
    expectedClaims: [newClaim("claim2-7", "uid2-7", "1Gi", "volume2-7", Bound, undefined, boundByController)],
    expectedEvents: ["Warning FailedBinding"],
    expectError: true,
    test: "claim",
  },
  {
    name: "2-8 - claim prebound to unbound volume that does not match the selector",
    initialVolumes: [newVolume("volume2-8", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [
      newVolume("volume2-8", "1Gi", "uid2-8", "claim2-8", BoundV, Retain, classEmpty, boundByController),
    ],
    initialClaims: [
      withLabelSelector(labels, newClaim("claim2-8", "uid2-8", "1Gi", "volume2-8", Pending, undefined)),
    ],
    expectedClaims: [
      withLabelSelector(
        labels,
        newClaim("claim2-8", "uid2-8", "1Gi", "volume2-8", Bound, undefined, bindCompleted),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "2-9 - claim prebound to unbound volume that size is smaller than requested",
    initialVolumes: [newVolume("volume2-9", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume2-9", "1Gi", "", "", Available, Retain, classEmpty)],
    initialClaims: [newClaim("claim2-9", "uid2-9", "2Gi", "volume2-9", Bound, undefined)],
    expectedClaims: [newClaim("claim2-9", "uid2-9", "2Gi", "volume2-9", Pending, undefined)],
    expectedEvents: ["Warning VolumeMismatch"],
    test: "claim",
  },
  {
    name: "2-10 - claim prebound to unbound volume that class is different",
    initialVolumes: [newVolume("volume2-10", "1Gi", "1", "", Available, Retain, classGold)],
    expectedVolumes: [newVolume("volume2-10", "1Gi", "", "", Available, Retain, classGold)],
    initialClaims: [newClaim("claim2-10", "uid2-10", "1Gi", "volume2-10", Bound, undefined)],
    expectedClaims: [newClaim("claim2-10", "uid2-10", "1Gi", "volume2-10", Pending, undefined)],
    expectedEvents: ["Warning VolumeMismatch"],
    test: "claim",
  },

  // [3-x] Syncing bound claims.
  {
    name: "3-1 - bound claim with missing VolumeName",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [
      newClaim("claim3-1", "uid3-1", "10Gi", "", Bound, undefined, boundByController, bindCompleted),
    ],
    expectedClaims: [
      {
        ...newClaim("claim3-1", "uid3-1", "10Gi", "", Lost, undefined, boundByController, bindCompleted),
        status: { phase: Lost },
      },
    ],
    expectedEvents: ["Warning ClaimLost"],
    test: "claim",
  },
  {
    name: "3-2 - bound claim with missing volume",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [
      newClaim("claim3-2", "uid3-2", "10Gi", "volume3-2", Bound, undefined, boundByController, bindCompleted),
    ],
    expectedClaims: [
      newClaim("claim3-2", "uid3-2", "10Gi", "volume3-2", Lost, undefined, boundByController, bindCompleted),
    ],
    expectedEvents: ["Warning ClaimLost"],
    test: "claim",
  },
  {
    name: "3-3 - bound claim with unbound volume",
    initialVolumes: [newVolume("volume3-3", "10Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [
      newVolume("volume3-3", "10Gi", "uid3-3", "claim3-3", BoundV, Retain, classEmpty, boundByController),
    ],
    initialClaims: [
      newClaim(
        "claim3-3",
        "uid3-3",
        "10Gi",
        "volume3-3",
        Pending,
        undefined,
        boundByController,
        bindCompleted,
      ),
    ],
    expectedClaims: [
      newClaim("claim3-3", "uid3-3", "10Gi", "volume3-3", Bound, undefined, boundByController, bindCompleted),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "3-4 - bound claim with prebound volume",
    initialVolumes: [newVolume("volume3-4", "10Gi", "claim3-4-x", "claim3-4", Available, Retain, classEmpty)],
    expectedVolumes: [
      newVolume("volume3-4", "10Gi", "claim3-4-x", "claim3-4", Available, Retain, classEmpty),
    ],
    initialClaims: [
      newClaim(
        "claim3-4",
        "uid3-4",
        "10Gi",
        "volume3-4",
        Pending,
        undefined,
        boundByController,
        bindCompleted,
      ),
    ],
    expectedClaims: [
      newClaim("claim3-4", "uid3-4", "10Gi", "volume3-4", Lost, undefined, boundByController, bindCompleted),
    ],
    expectedEvents: ["Warning ClaimMisbound"],
    test: "claim",
  },
  {
    name: "3-5 - bound claim with bound volume",
    initialVolumes: [newVolume("volume3-5", "10Gi", "uid3-5", "claim3-5", Available, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume3-5", "10Gi", "uid3-5", "claim3-5", BoundV, Retain, classEmpty)],
    initialClaims: [newClaim("claim3-5", "uid3-5", "10Gi", "volume3-5", Pending, undefined, bindCompleted)],
    expectedClaims: [newClaim("claim3-5", "uid3-5", "10Gi", "volume3-5", Bound, undefined, bindCompleted)],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "3-6 - bound claim with bound volume",
    initialVolumes: [newVolume("volume3-6", "10Gi", "uid3-6-x", "claim3-6-x", Available, Retain, classEmpty)],
    expectedVolumes: [
      newVolume("volume3-6", "10Gi", "uid3-6-x", "claim3-6-x", Available, Retain, classEmpty),
    ],
    initialClaims: [newClaim("claim3-6", "uid3-6", "10Gi", "volume3-6", Pending, undefined, bindCompleted)],
    expectedClaims: [newClaim("claim3-6", "uid3-6", "10Gi", "volume3-6", Lost, undefined, bindCompleted)],
    expectedEvents: ["Warning ClaimMisbound"],
    test: "claim",
  },
  {
    name: "3-7 - bound claim with unbound volume where selector doesn't match",
    initialVolumes: [newVolume("volume3-3", "10Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [
      newVolume("volume3-3", "10Gi", "uid3-3", "claim3-3", BoundV, Retain, classEmpty, boundByController),
    ],
    initialClaims: [
      withLabelSelector(
        labels,
        newClaim(
          "claim3-3",
          "uid3-3",
          "10Gi",
          "volume3-3",
          Pending,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedClaims: [
      withLabelSelector(
        labels,
        newClaim(
          "claim3-3",
          "uid3-3",
          "10Gi",
          "volume3-3",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "3-8 - Lost is announced once: a Lost claim stays silent",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [
      newClaim("claim3-8", "uid3-8", "10Gi", "volume3-8", Lost, undefined, boundByController, bindCompleted),
    ],
    expectedClaims: [
      newClaim("claim3-8", "uid3-8", "10Gi", "volume3-8", Lost, undefined, boundByController, bindCompleted),
    ],
    expectedEvents: [],
    test: "claim",
  },

  // [4-x] Volume sync.
  {
    name: "4-1 - pending volume",
    initialVolumes: [newVolume("volume4-1", "10Gi", "", "", Pending, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume4-1", "10Gi", "", "", Available, Retain, classEmpty)],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "4-2 - pending prebound volume",
    initialVolumes: [newVolume("volume4-2", "10Gi", "", "claim4-2", Pending, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume4-2", "10Gi", "", "claim4-2", Available, Retain, classEmpty)],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "4-3 - bound volume with missing claim",
    initialVolumes: [newVolume("volume4-3", "10Gi", "uid4-3", "claim4-3", BoundV, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume4-3", "10Gi", "uid4-3", "claim4-3", Released, Retain, classEmpty)],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "4-4 - volume bound to claim with different UID",
    initialVolumes: [newVolume("volume4-4", "10Gi", "uid4-4", "claim4-4", BoundV, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume4-4", "10Gi", "uid4-4", "claim4-4", Released, Retain, classEmpty)],
    initialClaims: [newClaim("claim4-4", "uid4-4-x", "10Gi", "volume4-4", Bound, undefined, bindCompleted)],
    expectedClaims: [newClaim("claim4-4", "uid4-4-x", "10Gi", "volume4-4", Bound, undefined, bindCompleted)],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "4-5 - volume bound by controller to unbound claim",
    initialVolumes: [
      newVolume("volume4-5", "10Gi", "uid4-5", "claim4-5", BoundV, Retain, classEmpty, boundByController),
    ],
    expectedVolumes: [
      newVolume("volume4-5", "10Gi", "uid4-5", "claim4-5", BoundV, Retain, classEmpty, boundByController),
    ],
    initialClaims: [newClaim("claim4-5", "uid4-5", "10Gi", "", Pending, undefined)],
    expectedClaims: [newClaim("claim4-5", "uid4-5", "10Gi", "", Pending, undefined)],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "4-5 - volume bound by user to bound claim",
    initialVolumes: [newVolume("volume4-5", "10Gi", "uid4-5", "claim4-5", BoundV, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume4-5", "10Gi", "uid4-5", "claim4-5", BoundV, Retain, classEmpty)],
    initialClaims: [newClaim("claim4-5", "uid4-5", "10Gi", "", Pending, undefined)],
    expectedClaims: [newClaim("claim4-5", "uid4-5", "10Gi", "", Pending, undefined)],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "4-6 - volume bound by to bound claim",
    initialVolumes: [newVolume("volume4-6", "10Gi", "uid4-6", "claim4-6", Available, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume4-6", "10Gi", "uid4-6", "claim4-6", BoundV, Retain, classEmpty)],
    initialClaims: [newClaim("claim4-6", "uid4-6", "10Gi", "volume4-6", Bound, undefined)],
    expectedClaims: [newClaim("claim4-6", "uid4-6", "10Gi", "volume4-6", Bound, undefined)],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "4-7 - volume bound by controller to claim bound somewhere else",
    initialVolumes: [
      newVolume("volume4-7", "10Gi", "uid4-7", "claim4-7", BoundV, Retain, classEmpty, boundByController),
    ],
    expectedVolumes: [newVolume("volume4-7", "10Gi", "", "", Available, Retain, classEmpty)],
    initialClaims: [newClaim("claim4-7", "uid4-7", "10Gi", "volume4-7-x", Bound, undefined)],
    expectedClaims: [newClaim("claim4-7", "uid4-7", "10Gi", "volume4-7-x", Bound, undefined)],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "4-8 - volume bound by user to claim bound somewhere else",
    initialVolumes: [newVolume("volume4-8", "10Gi", "uid4-8", "claim4-8", BoundV, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume4-8", "10Gi", "", "claim4-8", Available, Retain, classEmpty)],
    initialClaims: [newClaim("claim4-8", "uid4-8", "10Gi", "volume4-8-x", Bound, undefined)],
    expectedClaims: [newClaim("claim4-8", "uid4-8", "10Gi", "volume4-8-x", Bound, undefined)],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "4-9 - provisioned Delete volume whose claim is bound elsewhere is released for its deleter",
    initialVolumes: [
      newVolume(
        "volume4-9",
        "10Gi",
        "uid4-9",
        "claim4-9",
        BoundV,
        Delete,
        classEmpty,
        annDynamicallyProvisioned,
      ),
    ],
    expectedVolumes: [
      newVolume(
        "volume4-9",
        "10Gi",
        "uid4-9",
        "claim4-9",
        Released,
        Delete,
        classEmpty,
        annDynamicallyProvisioned,
      ),
    ],
    initialClaims: [newClaim("claim4-9", "uid4-9", "10Gi", "volume4-9-x", Bound, undefined)],
    expectedClaims: [newClaim("claim4-9", "uid4-9", "10Gi", "volume4-9-x", Bound, undefined)],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "4-10 - a Failed volume is never set to Released",
    initialVolumes: [newVolume("volume4-10", "10Gi", "uid4-10", "claim4-10", Failed, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume4-10", "10Gi", "uid4-10", "claim4-10", Failed, Retain, classEmpty)],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    test: "volume",
  },

  // [5-x] Reclaim policies once the claim is gone.
  {
    name: "5-1 - Retain keeps a released volume and its claimRef",
    initialVolumes: [newVolume("volume5-1", "1Gi", "uid5-1", "claim5-1", Released, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume5-1", "1Gi", "uid5-1", "claim5-1", Released, Retain, classEmpty)],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "5-2 - Delete of a CSI volume waits for the external deleter",
    initialVolumes: [
      newVolume(
        "volume5-2",
        "1Gi",
        "uid5-2",
        "claim5-2",
        BoundV,
        Delete,
        classEmpty,
        annDynamicallyProvisioned,
      ),
    ],
    expectedVolumes: [
      newVolume(
        "volume5-2",
        "1Gi",
        "uid5-2",
        "claim5-2",
        Released,
        Delete,
        classEmpty,
        annDynamicallyProvisioned,
      ),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    test: "volume",
  },
  {
    // kube-controller-manager since HonorPVReclaimPolicy (GA in 1.33) leaves every CSI volume, static or
    // not, to its driver's external-provisioner, which deletes only Released volumes: no Failed, no Event.
    name: "5-2b - Delete of a static CSI volume waits Released for its driver's external-provisioner",
    initialVolumes: [newVolume("volume5-2b", "1Gi", "uid5-2b", "claim5-2b", BoundV, Delete, classEmpty)],
    expectedVolumes: [newVolume("volume5-2b", "1Gi", "uid5-2b", "claim5-2b", Released, Delete, classEmpty)],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "5-3 - Delete of a non-CSI volume without a deleter fails",
    initialVolumes: [
      withoutCsi(newVolume("volume5-3", "1Gi", "uid5-3", "claim5-3", BoundV, Delete, classEmpty)),
    ],
    expectedVolumes: [
      {
        ...withoutCsi(newVolume("volume5-3", "1Gi", "uid5-3", "claim5-3", Failed, Delete, classEmpty)),
        status: {
          phase: Failed,
          message:
            'error getting deleter volume plugin for volume "volume5-3": no deletable volume plugin matched',
        },
      },
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: ["Warning VolumeFailedDelete"],
    test: "volume",
  },
  {
    name: "5-4 - Recycle without a recycler plugin fails",
    initialVolumes: [newVolume("volume5-4", "1Gi", "uid5-4", "claim5-4", Released, Recycle, classEmpty)],
    expectedVolumes: [
      {
        ...newVolume("volume5-4", "1Gi", "uid5-4", "claim5-4", Failed, Recycle, classEmpty),
        status: { phase: Failed, message: "No recycler plugin found for the volume!" },
      },
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: ["Warning VolumeFailedRecycle"],
    test: "volume",
  },
  {
    name: "5-5 - Recycle waits while pods use the claim",
    initialVolumes: [newVolume("volume5-5", "1Gi", "uid5-5", "claim5-5", Released, Recycle, classEmpty)],
    expectedVolumes: [newVolume("volume5-5", "1Gi", "uid5-5", "claim5-5", Released, Recycle, classEmpty)],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: ["Normal VolumeFailedRecycle"],
    pods: [pod("user", "claim5-5", "node1", "Running")],
    test: "volume",
  },
  {
    name: "5-6 - unknown reclaim policy fails the volume once",
    initialVolumes: [
      withReclaimPolicy(
        "Shred",
        newVolume("volume5-6", "1Gi", "uid5-6", "claim5-6", BoundV, Retain, classEmpty),
      ),
    ],
    expectedVolumes: [
      {
        ...withReclaimPolicy(
          "Shred",
          newVolume("volume5-6", "1Gi", "uid5-6", "claim5-6", Failed, Retain, classEmpty),
        ),
        status: { phase: Failed, message: "Volume has unrecognized PersistentVolumeReclaimPolicy" },
      },
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: ["Warning VolumeUnknownReclaimPolicy"],
    test: "volume",
  },

  // [11-x] Provisioning hand-off and delayed binding with pods.
  {
    name: "11-1 - external provisioning: both annotations and an Event, status untouched",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-1", "uid11-1", "1Gi", "", Pending, classExternal)],
    expectedClaims: [
      newClaim(
        "claim11-1",
        "uid11-1",
        "1Gi",
        "",
        Pending,
        classExternal,
        annStorageProvisioner,
        annBetaStorageProvisioner,
      ),
    ],
    expectedEvents: ["Normal ExternalProvisioning"],
    test: "claim",
  },
  {
    name: "11-2 - external provisioning: annotations already there, no write",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [
      newClaim(
        "claim11-2",
        "uid11-2",
        "1Gi",
        "",
        Pending,
        classExternal,
        annStorageProvisioner,
        annBetaStorageProvisioner,
      ),
    ],
    expectedClaims: [
      newClaim(
        "claim11-2",
        "uid11-2",
        "1Gi",
        "",
        Pending,
        classExternal,
        annStorageProvisioner,
        annBetaStorageProvisioner,
      ),
    ],
    expectedEvents: ["Normal ExternalProvisioning"],
    test: "claim",
  },
  {
    name: "11-3 - unknown class: ProvisioningFailed",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-3", "uid11-3", "1Gi", "", Pending, "missing")],
    expectedClaims: [newClaim("claim11-3", "uid11-3", "1Gi", "", Pending, "missing")],
    expectedEvents: ["Warning ProvisioningFailed"],
    test: "claim",
  },
  {
    name: "11-4 - delayed binding with a selected node: hand to the provisioner",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [
      withAnnotation(
        annSelectedNode,
        "node1",
        newClaim("claim11-4", "uid11-4", "1Gi", "", Pending, classWait),
      ),
    ],
    expectedClaims: [
      withAnnotation(
        annSelectedNode,
        "node1",
        newClaim(
          "claim11-4",
          "uid11-4",
          "1Gi",
          "",
          Pending,
          classWait,
          annStorageProvisioner,
          annBetaStorageProvisioner,
        ),
      ),
    ],
    expectedEvents: ["Normal ExternalProvisioning"],
    test: "claim",
  },
  {
    name: "11-5 - delayed binding: one unscheduled pod",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-5", "uid11-5", "1Gi", "", Pending, classWait)],
    expectedClaims: [newClaim("claim11-5", "uid11-5", "1Gi", "", Pending, classWait)],
    expectedEvents: ["Normal WaitForPodScheduled"],
    pods: [
      pod("p1", "claim11-5"),
      pod("done", "claim11-5", undefined, "Succeeded"),
      pod("placed", "claim11-5", "node1"),
    ],
    test: "claim",
  },
  {
    name: "11-6 - in-tree provisioner names have no plugin here",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-6", "uid11-6", "1Gi", "", Pending, "local")],
    expectedClaims: [newClaim("claim11-6", "uid11-6", "1Gi", "", Pending, "local")],
    expectedEvents: ["Warning ProvisioningFailed"],
    classes: [storageClass("local", "kubernetes.io/no-provisioner")],
    test: "claim",
  },
  {
    name: "11-7 - retroactive default class: newest default wins",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-7", "uid11-7", "1Gi", "", Pending, undefined)],
    expectedClaims: [newClaim("claim11-7", "uid11-7", "1Gi", "", Pending, classSilver)],
    expectedEvents: [],
    classes: [
      storageClass(classGold, mockProvisioner, { isDefault: true, created: "2025-01-01T00:00:00Z" }),
      storageClass(classSilver, mockProvisioner, { isDefault: true, created: "2025-06-01T00:00:00Z" }),
    ],
    test: "claim",
  },
  {
    name: '11-8 - no default class for a claim that asked for ""',
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-8", "uid11-8", "1Gi", "", Pending, classEmpty)],
    expectedClaims: [newClaim("claim11-8", "uid11-8", "1Gi", "", Pending, classEmpty)],
    expectedEvents: ["Normal FailedBinding"],
    classes: [storageClass(classGold, mockProvisioner, { isDefault: true })],
    test: "claim",
  },

  // [13-x] Classes.
  {
    name: "13-1 - binding to class",
    initialVolumes: [
      newVolume("volume13-1-1", "1Gi", "", "", Available, Retain, classEmpty),
      newVolume("volume13-1-2", "10Gi", "", "", Available, Retain, classGold),
    ],
    expectedVolumes: [
      newVolume("volume13-1-1", "1Gi", "", "", Available, Retain, classEmpty),
      newVolume("volume13-1-2", "10Gi", "uid13-1", "claim13-1", BoundV, Retain, classGold, boundByController),
    ],
    initialClaims: [newClaim("claim13-1", "uid13-1", "1Gi", "", Pending, classGold)],
    expectedClaims: [
      withExpectedCapacity(
        "10Gi",
        newClaim(
          "claim13-1",
          "uid13-1",
          "1Gi",
          "volume13-1-2",
          Bound,
          classGold,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "13-2 - binding without a class",
    initialVolumes: [
      newVolume("volume13-2-1", "1Gi", "", "", Available, Retain, classGold),
      newVolume("volume13-2-2", "10Gi", "", "", Available, Retain, classEmpty),
    ],
    expectedVolumes: [
      newVolume("volume13-2-1", "1Gi", "", "", Available, Retain, classGold),
      newVolume(
        "volume13-2-2",
        "10Gi",
        "uid13-2",
        "claim13-2",
        BoundV,
        Retain,
        classEmpty,
        boundByController,
      ),
    ],
    initialClaims: [newClaim("claim13-2", "uid13-2", "1Gi", "", Pending, undefined)],
    expectedClaims: [
      withExpectedCapacity(
        "10Gi",
        newClaim(
          "claim13-2",
          "uid13-2",
          "1Gi",
          "volume13-2-2",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "13-3 - binding to specific a class",
    initialVolumes: [
      newVolume("volume13-3-1", "1Gi", "", "", Available, Retain, classSilver),
      newVolume("volume13-3-2", "10Gi", "", "", Available, Retain, classGold),
    ],
    expectedVolumes: [
      newVolume("volume13-3-1", "1Gi", "", "", Available, Retain, classSilver),
      newVolume("volume13-3-2", "10Gi", "uid13-3", "claim13-3", BoundV, Retain, classGold, boundByController),
    ],
    initialClaims: [newClaim("claim13-3", "uid13-3", "1Gi", "", Pending, classGold)],
    expectedClaims: [
      withExpectedCapacity(
        "10Gi",
        newClaim(
          "claim13-3",
          "uid13-3",
          "1Gi",
          "volume13-3-2",
          Bound,
          classGold,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "13-4 - empty class",
    initialVolumes: [newVolume("volume13-4", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [
      newVolume("volume13-4", "1Gi", "uid13-4", "claim13-4", BoundV, Retain, classEmpty, boundByController),
    ],
    initialClaims: [newClaim("claim13-4", "uid13-4", "1Gi", "", Pending, classEmpty)],
    expectedClaims: [
      newClaim(
        "claim13-4",
        "uid13-4",
        "1Gi",
        "volume13-4",
        Bound,
        classEmpty,
        boundByController,
        bindCompleted,
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "13-5 - nil class",
    initialVolumes: [newVolume("volume13-5", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [
      newVolume("volume13-5", "1Gi", "uid13-5", "claim13-5", BoundV, Retain, classEmpty, boundByController),
    ],
    initialClaims: [newClaim("claim13-5", "uid13-5", "1Gi", "", Pending, undefined)],
    expectedClaims: [
      newClaim(
        "claim13-5",
        "uid13-5",
        "1Gi",
        "volume13-5",
        Bound,
        undefined,
        boundByController,
        bindCompleted,
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
];

function withAccessModes_v(modes: string[], v: ReturnType<typeof newVolume>): ReturnType<typeof newVolume> {
  return { ...v, spec: { ...v.spec, accessModes: modes } };
}

const block = "Block";
const file = "Filesystem";

const blockCases: SyncCase[] = [
  {
    name: "14-1 - binding to volumeMode block",
    initialVolumes: [
      withVolumeMode(block, newVolume("volume14-1", "10Gi", "", "", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVolumeMode(
        block,
        newVolume(
          "volume14-1",
          "10Gi",
          "uid14-1",
          "claim14-1",
          BoundV,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    initialClaims: [withVolumeMode(block, newClaim("claim14-1", "uid14-1", "10Gi", "", Pending, undefined))],
    expectedClaims: [
      withVolumeMode(
        block,
        newClaim(
          "claim14-1",
          "uid14-1",
          "10Gi",
          "volume14-1",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "14-2 - binding to volumeMode filesystem",
    initialVolumes: [
      withVolumeMode(file, newVolume("volume14-2", "10Gi", "", "", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVolumeMode(
        file,
        newVolume(
          "volume14-2",
          "10Gi",
          "uid14-2",
          "claim14-2",
          BoundV,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    initialClaims: [withVolumeMode(file, newClaim("claim14-2", "uid14-2", "10Gi", "", Pending, undefined))],
    expectedClaims: [
      withVolumeMode(
        file,
        newClaim(
          "claim14-2",
          "uid14-2",
          "10Gi",
          "volume14-2",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "14-3 - do not bind pv volumeMode filesystem and pvc volumeMode block",
    initialVolumes: [
      withVolumeMode(file, newVolume("volume14-3", "10Gi", "", "", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVolumeMode(file, newVolume("volume14-3", "10Gi", "", "", Available, Retain, classEmpty)),
    ],
    initialClaims: [withVolumeMode(block, newClaim("claim14-3", "uid14-3", "10Gi", "", Pending, undefined))],
    expectedClaims: [withVolumeMode(block, newClaim("claim14-3", "uid14-3", "10Gi", "", Pending, undefined))],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
  {
    name: "14-4 - do not bind pv volumeMode block and pvc volumeMode filesystem",
    initialVolumes: [
      withVolumeMode(block, newVolume("volume14-4", "10Gi", "", "", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVolumeMode(block, newVolume("volume14-4", "10Gi", "", "", Available, Retain, classEmpty)),
    ],
    initialClaims: [withVolumeMode(file, newClaim("claim14-4", "uid14-4", "10Gi", "", Pending, undefined))],
    expectedClaims: [withVolumeMode(file, newClaim("claim14-4", "uid14-4", "10Gi", "", Pending, undefined))],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
  {
    name: "14-5 - do not bind when matching class but not volumeMode",
    initialVolumes: [
      withVolumeMode(file, newVolume("volume14-5", "10Gi", "", "", Available, Retain, classGold)),
    ],
    expectedVolumes: [
      withVolumeMode(file, newVolume("volume14-5", "10Gi", "", "", Available, Retain, classGold)),
    ],
    initialClaims: [withVolumeMode(block, newClaim("claim14-5", "uid14-5", "10Gi", "", Pending, classGold))],
    expectedClaims: [withVolumeMode(block, newClaim("claim14-5", "uid14-5", "10Gi", "", Pending, classGold))],
    expectedEvents: ["Warning ProvisioningFailed"],
    test: "claim",
  },
  {
    name: "14-5-1 - do not bind when matching volumeModes but class does not match",
    initialVolumes: [
      withVolumeMode(file, newVolume("volume14-5-1", "10Gi", "", "", Available, Retain, classGold)),
    ],
    expectedVolumes: [
      withVolumeMode(file, newVolume("volume14-5-1", "10Gi", "", "", Available, Retain, classGold)),
    ],
    initialClaims: [
      withVolumeMode(file, newClaim("claim14-5-1", "uid14-5-1", "10Gi", "", Pending, classSilver)),
    ],
    expectedClaims: [
      withVolumeMode(file, newClaim("claim14-5-1", "uid14-5-1", "10Gi", "", Pending, classSilver)),
    ],
    expectedEvents: ["Warning ProvisioningFailed"],
    test: "claim",
  },
  {
    name: "14-5-2 - do not bind when pvc is prebound to pv with matching volumeModes but class does not match",
    initialVolumes: [
      withVolumeMode(file, newVolume("volume14-5-2", "10Gi", "", "", Available, Retain, classGold)),
    ],
    expectedVolumes: [
      withVolumeMode(file, newVolume("volume14-5-2", "10Gi", "", "", Available, Retain, classGold)),
    ],
    initialClaims: [
      withVolumeMode(
        file,
        newClaim("claim14-5-2", "uid14-5-2", "10Gi", "volume14-5-2", Pending, classSilver),
      ),
    ],
    expectedClaims: [
      withVolumeMode(
        file,
        newClaim("claim14-5-2", "uid14-5-2", "10Gi", "volume14-5-2", Pending, classSilver),
      ),
    ],
    expectedEvents: ["Warning VolumeMismatch"],
    test: "claim",
  },
  {
    name: "14-7 - bind when pv volume is prebound and volumeModes match",
    initialVolumes: [
      withVolumeMode(block, newVolume("volume14-7", "10Gi", "", "claim14-7", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVolumeMode(
        block,
        newVolume("volume14-7", "10Gi", "uid14-7", "claim14-7", BoundV, Retain, classEmpty),
      ),
    ],
    initialClaims: [withVolumeMode(block, newClaim("claim14-7", "uid14-7", "10Gi", "", Pending, undefined))],
    expectedClaims: [
      withVolumeMode(
        block,
        newClaim(
          "claim14-7",
          "uid14-7",
          "10Gi",
          "volume14-7",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "14-8 - do not bind when pvc is prebound to pv with mismatching volumeModes",
    initialVolumes: [
      withVolumeMode(block, newVolume("volume14-8", "10Gi", "", "", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVolumeMode(block, newVolume("volume14-8", "10Gi", "", "", Available, Retain, classEmpty)),
    ],
    initialClaims: [
      withVolumeMode(file, newClaim("claim14-8", "uid14-8", "10Gi", "volume14-8", Pending, undefined)),
    ],
    expectedClaims: [
      withVolumeMode(file, newClaim("claim14-8", "uid14-8", "10Gi", "volume14-8", Pending, undefined)),
    ],
    expectedEvents: ["Warning VolumeMismatch"],
    test: "claim",
  },
  {
    name: "14-8-1 - do not bind when pv is prebound to pvc with mismatching volumeModes",
    initialVolumes: [
      withVolumeMode(
        block,
        newVolume("volume14-8-1", "10Gi", "", "claim14-8-1", Available, Retain, classEmpty),
      ),
    ],
    expectedVolumes: [
      withVolumeMode(
        block,
        newVolume("volume14-8-1", "10Gi", "", "claim14-8-1", Available, Retain, classEmpty),
      ),
    ],
    initialClaims: [
      withVolumeMode(file, newClaim("claim14-8-1", "uid14-8-1", "10Gi", "", Pending, undefined)),
    ],
    expectedClaims: [
      withVolumeMode(file, newClaim("claim14-8-1", "uid14-8-1", "10Gi", "", Pending, undefined)),
    ],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
  {
    name: "14-9 - bind when pvc is prebound to pv with matching volumeModes block",
    initialVolumes: [
      withVolumeMode(block, newVolume("volume14-9", "10Gi", "", "", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVolumeMode(
        block,
        newVolume(
          "volume14-9",
          "10Gi",
          "uid14-9",
          "claim14-9",
          BoundV,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    initialClaims: [
      withVolumeMode(block, newClaim("claim14-9", "uid14-9", "10Gi", "volume14-9", Pending, undefined)),
    ],
    expectedClaims: [
      withVolumeMode(
        block,
        newClaim("claim14-9", "uid14-9", "10Gi", "volume14-9", Bound, undefined, bindCompleted),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "14-10 - bind when pv is prebound to pvc with matching volumeModes block",
    initialVolumes: [
      withVolumeMode(
        block,
        newVolume("volume14-10", "10Gi", "", "claim14-10", Available, Retain, classEmpty),
      ),
    ],
    expectedVolumes: [
      withVolumeMode(
        block,
        newVolume("volume14-10", "10Gi", "uid14-10", "claim14-10", BoundV, Retain, classEmpty),
      ),
    ],
    initialClaims: [
      withVolumeMode(block, newClaim("claim14-10", "uid14-10", "10Gi", "", Pending, undefined)),
    ],
    expectedClaims: [
      withVolumeMode(
        block,
        newClaim(
          "claim14-10",
          "uid14-10",
          "10Gi",
          "volume14-10",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "14-11 - bind when pvc is prebound to pv with matching volumeModes filesystem",
    initialVolumes: [
      withVolumeMode(file, newVolume("volume14-11", "10Gi", "", "", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVolumeMode(
        file,
        newVolume(
          "volume14-11",
          "10Gi",
          "uid14-11",
          "claim14-11",
          BoundV,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    initialClaims: [
      withVolumeMode(file, newClaim("claim14-11", "uid14-11", "10Gi", "volume14-11", Pending, undefined)),
    ],
    expectedClaims: [
      withVolumeMode(
        file,
        newClaim("claim14-11", "uid14-11", "10Gi", "volume14-11", Bound, undefined, bindCompleted),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "14-12 - bind when pv is prebound to pvc with matching volumeModes filesystem",
    initialVolumes: [
      withVolumeMode(file, newVolume("volume14-12", "10Gi", "", "claim14-12", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVolumeMode(
        file,
        newVolume("volume14-12", "10Gi", "uid14-12", "claim14-12", BoundV, Retain, classEmpty),
      ),
    ],
    initialClaims: [withVolumeMode(file, newClaim("claim14-12", "uid14-12", "10Gi", "", Pending, undefined))],
    expectedClaims: [
      withVolumeMode(
        file,
        newClaim(
          "claim14-12",
          "uid14-12",
          "10Gi",
          "volume14-12",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "14-13 - output warning when pv is prebound to pvc with different volumeModes",
    initialVolumes: [
      withVolumeMode(
        file,
        newVolume(
          "volume14-13",
          "10Gi",
          "uid14-13",
          "claim14-13",
          Available,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    expectedVolumes: [
      withVolumeMode(
        file,
        newVolume(
          "volume14-13",
          "10Gi",
          "uid14-13",
          "claim14-13",
          Available,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    initialClaims: [
      withVolumeMode(block, newClaim("claim14-13", "uid14-13", "10Gi", "", Pending, undefined)),
    ],
    expectedClaims: [
      withVolumeMode(block, newClaim("claim14-13", "uid14-13", "10Gi", "", Pending, undefined)),
    ],
    expectedEvents: ["Warning VolumeMismatch", "Warning VolumeMismatch"],
    test: "volume",
  },
  {
    name: "14-13-1 - output warning when pv is prebound to pvc with different volumeModes",
    initialVolumes: [
      withVolumeMode(
        block,
        newVolume(
          "volume14-13-1",
          "10Gi",
          "uid14-13-1",
          "claim14-13-1",
          Available,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    expectedVolumes: [
      withVolumeMode(
        block,
        newVolume(
          "volume14-13-1",
          "10Gi",
          "uid14-13-1",
          "claim14-13-1",
          Available,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    initialClaims: [
      withVolumeMode(file, newClaim("claim14-13-1", "uid14-13-1", "10Gi", "", Pending, undefined)),
    ],
    expectedClaims: [
      withVolumeMode(file, newClaim("claim14-13-1", "uid14-13-1", "10Gi", "", Pending, undefined)),
    ],
    expectedEvents: ["Warning VolumeMismatch", "Warning VolumeMismatch"],
    test: "volume",
  },
  {
    name: "14-14 - wait for synClaim without warning when pv is prebound to pvc with matching volumeModes block",
    initialVolumes: [
      withVolumeMode(
        block,
        newVolume(
          "volume14-14",
          "10Gi",
          "uid14-14",
          "claim14-14",
          Available,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    expectedVolumes: [
      withVolumeMode(
        block,
        newVolume(
          "volume14-14",
          "10Gi",
          "uid14-14",
          "claim14-14",
          Available,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    initialClaims: [
      withVolumeMode(block, newClaim("claim14-14", "uid14-14", "10Gi", "", Pending, undefined)),
    ],
    expectedClaims: [
      withVolumeMode(block, newClaim("claim14-14", "uid14-14", "10Gi", "", Pending, undefined)),
    ],
    expectedEvents: [],
    test: "volume",
  },
  {
    name: "14-14-1 - wait for synClaim without warning when pv is prebound to pvc with matching volumeModes file",
    initialVolumes: [
      withVolumeMode(
        file,
        newVolume(
          "volume14-14-1",
          "10Gi",
          "uid14-14-1",
          "claim14-14-1",
          Available,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    expectedVolumes: [
      withVolumeMode(
        file,
        newVolume(
          "volume14-14-1",
          "10Gi",
          "uid14-14-1",
          "claim14-14-1",
          Available,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    initialClaims: [
      withVolumeMode(file, newClaim("claim14-14-1", "uid14-14-1", "10Gi", "", Pending, undefined)),
    ],
    expectedClaims: [
      withVolumeMode(file, newClaim("claim14-14-1", "uid14-14-1", "10Gi", "", Pending, undefined)),
    ],
    expectedEvents: [],
    test: "volume",
  },
];

describe("binder: one sync (upstream TestSync)", () => {
  for (const c of syncCases) it(c.name, () => void runSyncCase(c));
});

describe("binder: block volumes (upstream TestSyncBlockVolume)", () => {
  for (const c of blockCases) it(c.name, () => void runSyncCase(c));
});

describe("binder: repeated syncs until steady (upstream TestMultiSync)", () => {
  it("10-1 - successful bind", () => {
    runMultiSync({
      name: "10-1",
      initialVolumes: [newVolume("volume10-1", "1Gi", "", "", Pending, Retain, classEmpty)],
      expectedVolumes: [
        newVolume("volume10-1", "1Gi", "uid10-1", "claim10-1", BoundV, Retain, classEmpty, boundByController),
      ],
      initialClaims: [newClaim("claim10-1", "uid10-1", "1Gi", "", Pending, undefined)],
      expectedClaims: [
        newClaim(
          "claim10-1",
          "uid10-1",
          "1Gi",
          "volume10-1",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ],
      expectedEvents: [],
      test: "claim",
    });
  });

  it("10-2 - bind PV race: two PVs claim one claim; the loser rolls back", () => {
    runMultiSync({
      name: "10-2",
      initialVolumes: [
        newVolume(
          "volume10-2-1",
          "1Gi",
          "uid10-2",
          "claim10-2",
          BoundV,
          Retain,
          classEmpty,
          boundByController,
        ),
        newVolume(
          "volume10-2-2",
          "1Gi",
          "uid10-2",
          "claim10-2",
          BoundV,
          Retain,
          classEmpty,
          boundByController,
        ),
      ],
      expectedVolumes: [
        newVolume(
          "volume10-2-1",
          "1Gi",
          "uid10-2",
          "claim10-2",
          BoundV,
          Retain,
          classEmpty,
          boundByController,
        ),
        newVolume("volume10-2-2", "1Gi", "", "", Available, Retain, classEmpty),
      ],
      initialClaims: [
        newClaim(
          "claim10-2",
          "uid10-2",
          "1Gi",
          "volume10-2-1",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ],
      expectedClaims: [
        newClaim(
          "claim10-2",
          "uid10-2",
          "1Gi",
          "volume10-2-1",
          Bound,
          undefined,
          boundByController,
          bindCompleted,
        ),
      ],
      expectedEvents: [],
      test: "claim",
    });
  });

  it("10-3 - provisioned PV pre-bound to its claim: the volume sync hands over and the claim binds", () => {
    const world = runMultiSync({
      name: "10-3",
      initialVolumes: [
        newVolume(
          "pvc-uid10-3",
          "1Gi",
          "uid10-3",
          "claim10-3",
          "",
          Delete,
          classExternal,
          annDynamicallyProvisioned,
        ),
      ],
      expectedVolumes: [
        newVolume(
          "pvc-uid10-3",
          "1Gi",
          "uid10-3",
          "claim10-3",
          BoundV,
          Delete,
          classExternal,
          annDynamicallyProvisioned,
        ),
      ],
      initialClaims: [
        newClaim(
          "claim10-3",
          "uid10-3",
          "1Gi",
          "",
          Pending,
          classExternal,
          annStorageProvisioner,
          annBetaStorageProvisioner,
        ),
      ],
      expectedClaims: [
        newClaim(
          "claim10-3",
          "uid10-3",
          "1Gi",
          "pvc-uid10-3",
          Bound,
          classExternal,
          annStorageProvisioner,
          annBetaStorageProvisioner,
          boundByController,
          bindCompleted,
        ),
      ],
      expectedEvents: [],
      test: "volume",
    });
    assert.equal(world.events.length, 0);
  });
});

describe("binder: Event messages match upstream's wording", () => {
  it("ExternalProvisioning names the provisioner", () => {
    const c = syncCases.find((x) => x.name.startsWith("11-1"))!;
    const world = runSyncCase(c);
    assert.equal(
      world.eventMessages[0],
      `Waiting for a volume to be created either by the external provisioner '${mockProvisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.`,
    );
  });
  it("WaitForPodScheduled names the waiting pod", () => {
    const world = runSyncCase(syncCases.find((x) => x.name.startsWith("11-5"))!);
    assert.deepEqual(world.eventMessages, ["waiting for pod p1 to be scheduled"]);
  });
  it("VolumeMismatch says why", () => {
    const world = runSyncCase(syncCases.find((x) => x.name.startsWith("2-9"))!);
    assert.deepEqual(world.eventMessages, [
      'Cannot bind to requested volume "volume2-9": requested PV is too small',
    ]);
  });
  it("ClaimLost and FailedBinding", () => {
    assert.deepEqual(runSyncCase(syncCases.find((x) => x.name.startsWith("3-2"))!).eventMessages, [
      "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
    ]);
    assert.deepEqual(runSyncCase(syncCases.find((x) => x.name.startsWith("2-6"))!).eventMessages, [
      'volume "volume2-6" already bound to a different claim.',
    ]);
  });
});

describe("binder: explain why a claim is Pending", () => {
  it("lists every volume with the reason it was passed over, and what the claim waits for", async () => {
    const { explainClaim } = await import("../../shared/binder/explain.ts");
    const claim = withLabelSelector(
      { tier: "gold" },
      newClaim("c", "uid-c", "5Gi", "", Pending, classExternal),
    );
    const volumes = [
      withLabels({ tier: "gold" }, newVolume("too-small", "1Gi", "", "", Available, Retain, classExternal)),
      withLabels({ tier: "gold" }, newVolume("other-class", "10Gi", "", "", Available, Retain, classGold)),
      newVolume("no-labels", "10Gi", "", "", Available, Retain, classExternal),
      withLabels(
        { tier: "gold" },
        newVolume("taken", "10Gi", "uid-x", "someone", BoundV, Retain, classExternal),
      ),
      withLabels(
        { tier: "gold" },
        withAccessModes_v(
          ["ReadWriteMany"],
          newVolume("rwx", "10Gi", "", "", Available, Retain, classExternal),
        ),
      ),
      withLabels({ tier: "gold" }, newVolume("released", "10Gi", "", "", Released, Retain, classExternal)),
      withVolumeMode(
        block,
        withLabels({ tier: "gold" }, newVolume("block", "10Gi", "", "", Available, Retain, classExternal)),
      ),
    ];
    const e = explainClaim(claim, {
      volumes,
      classes: [storageClass(classExternal, mockProvisioner)],
      pods: [],
      now: "2026-01-01T00:00:00Z",
    });
    assert.deepEqual(
      e.volumes.map((v) => [v.name, v.verdict, v.reason]),
      [
        ["too-small", "not chosen", "too-small"],
        ["other-class", "not chosen", "class"],
        ["no-labels", "not chosen", "selector"],
        ["taken", "not chosen", "bound-to-other-claim"],
        ["rwx", "not chosen", "access-modes"],
        ["released", "not chosen", "phase"],
        ["block", "not chosen", "volume-mode"],
      ],
    );
    assert.equal(e.decision, `waiting for external provisioner ${mockProvisioner}`);
    assert.match(e.waitingFor, /the provisioner 'example.com\/mock-provisioner' to create a volume/);
  });

  it("says which volume the next sync binds, and that WaitForFirstConsumer waits for a pod", async () => {
    const { explainClaim } = await import("../../shared/binder/explain.ts");
    const view = {
      volumes: [newVolume("v", "1Gi", "", "", Available, Retain, classEmpty)],
      classes: [],
      pods: [],
      now: "2026-01-01T00:00:00Z",
    };
    const e = explainClaim(newClaim("c", "uid-c", "1Gi", "", Pending, classEmpty), view);
    assert.deepEqual(e.volumes, [{ name: "v", verdict: "would bind" }]);
    assert.equal(e.waitingFor, "nothing: the next sync binds it to volume v");
    const wait = explainClaim(newClaim("w", "uid-w", "1Gi", "", Pending, classWait), {
      volumes: [newVolume("v", "1Gi", "", "", Available, Retain, classWait)],
      classes: [storageClass(classWait, mockProvisioner, { bindingMode: "WaitForFirstConsumer" })],
      pods: [],
      now: "2026-01-01T00:00:00Z",
    });
    assert.equal(wait.volumes[0]?.reason, "delayed-binding");
    assert.match(wait.waitingFor, /a pod that uses this claim to be scheduled/);
  });
});

describe("binder: the provisioner's intent finalizer", () => {
  const intent = "storage.kube-storage-functions.io/provisioning";
  function withFinalizer<T extends ReturnType<typeof newClaim>>(c: T): T {
    return { ...c, metadata: { ...c.metadata, finalizers: ["kubernetes.io/pvc-protection", intent] } };
  }
  it("is dropped in the bind write when the PV was provisioned for this claim", () => {
    runMultiSync({
      name: "15-1",
      initialVolumes: [
        newVolume(
          "pvc-uid15-1",
          "1Gi",
          "uid15-1",
          "claim15-1",
          Available,
          Delete,
          classExternal,
          annDynamicallyProvisioned,
        ),
      ],
      expectedVolumes: [
        newVolume(
          "pvc-uid15-1",
          "1Gi",
          "uid15-1",
          "claim15-1",
          BoundV,
          Delete,
          classExternal,
          annDynamicallyProvisioned,
        ),
      ],
      initialClaims: [
        withFinalizer(
          newClaim("claim15-1", "uid15-1", "1Gi", "", Pending, classExternal, annStorageProvisioner),
        ),
      ],
      expectedClaims: [
        {
          ...newClaim(
            "claim15-1",
            "uid15-1",
            "1Gi",
            "pvc-uid15-1",
            Bound,
            classExternal,
            annStorageProvisioner,
            boundByController,
            bindCompleted,
          ),
          metadata: {
            ...newClaim(
              "claim15-1",
              "uid15-1",
              "1Gi",
              "pvc-uid15-1",
              Bound,
              classExternal,
              annStorageProvisioner,
              boundByController,
              bindCompleted,
            ).metadata,
            finalizers: ["kubernetes.io/pvc-protection"],
          },
        },
      ],
      expectedEvents: [],
      test: "claim",
    });
  });
  it("stays when the claim binds to a static PV: a provisioned volume may still need cleaning up", () => {
    const world = runMultiSync({
      name: "15-2",
      initialVolumes: [newVolume("static", "1Gi", "", "", Available, Retain, classExternal)],
      expectedVolumes: [
        newVolume("static", "1Gi", "uid15-2", "claim15-2", BoundV, Retain, classExternal, boundByController),
      ],
      initialClaims: [
        withFinalizer(
          newClaim("claim15-2", "uid15-2", "1Gi", "", Pending, classExternal, annStorageProvisioner),
        ),
      ],
      expectedClaims: [
        withFinalizer(
          newClaim(
            "claim15-2",
            "uid15-2",
            "1Gi",
            "static",
            Bound,
            classExternal,
            annStorageProvisioner,
            boundByController,
            bindCompleted,
          ),
        ),
      ],
      expectedEvents: [],
      test: "claim",
    });
    assert.ok(world.claims.get("default/claim15-2")?.metadata.finalizers?.includes(intent));
  });
});

describe("binder: a provisioned volume wins without listing every volume", () => {
  it("only an exact-modes volume pre-bound to the claim qualifies", async () => {
    const { winsWithoutSearch } = await import("../../shared/binder/find-best-match.ts");
    const claim = newClaim("c", "uid-c", "1Gi", "", Pending, classExternal);
    const table: [string, ReturnType<typeof newVolume>, boolean][] = [
      ["pre-bound, same modes", newVolume("v", "1Gi", "uid-c", "c", "", Delete, classExternal), true],
      ["pre-bound by name only, same modes", newVolume("v", "1Gi", "", "c", "", Delete, classExternal), true],
      [
        "pre-bound, more modes than asked",
        withAccessModes_v(
          ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"],
          newVolume("v", "1Gi", "uid-c", "c", "", Delete, classExternal),
        ),
        false,
      ],
      ["bound to another claim", newVolume("v", "1Gi", "uid-x", "x", "", Delete, classExternal), false],
      ["not bound to anything", newVolume("v", "1Gi", "", "", Available, Delete, classExternal), false],
      ["pre-bound but too small", newVolume("v", "1Mi", "uid-c", "c", "", Delete, classExternal), false],
    ];
    for (const [name, v, want] of table) assert.equal(winsWithoutSearch(v, claim, false), want, name);
  });
});

describe("binder: progress Events wait for claims that wait", () => {
  it("a claim created seconds ago is handed over without ExternalProvisioning; one a minute old gets it", () => {
    const young = {
      ...newClaim("young", "uid-y", "1Gi", "", Pending, classExternal),
      metadata: {
        name: "young",
        namespace: "default",
        uid: "uid-y",
        creationTimestamp: "2025-12-31T23:59:55Z",
      },
    };
    const old = {
      ...young,
      metadata: { ...young.metadata, name: "old", uid: "uid-o", creationTimestamp: "2025-12-31T23:59:00Z" },
    };
    const w1 = runSyncCase({
      name: "young",
      initialVolumes: [],
      expectedVolumes: [],
      initialClaims: [young],
      expectedClaims: [
        {
          ...young,
          metadata: {
            ...young.metadata,
            annotations: {
              [annStorageProvisioner]: mockProvisioner,
              [annBetaStorageProvisioner]: mockProvisioner,
            },
          },
        },
      ],
      expectedEvents: [],
      test: "claim",
    });
    assert.deepEqual(w1.events, []);
    const w2 = runSyncCase({
      name: "old",
      initialVolumes: [],
      expectedVolumes: [],
      initialClaims: [old],
      expectedClaims: [
        {
          ...old,
          metadata: {
            ...old.metadata,
            annotations: {
              [annStorageProvisioner]: mockProvisioner,
              [annBetaStorageProvisioner]: mockProvisioner,
            },
          },
        },
      ],
      expectedEvents: ["Normal ExternalProvisioning"],
      test: "claim",
    });
    assert.deepEqual(w2.events, ["Normal ExternalProvisioning"]);
  });
});
