// The binder and VolumeAttributesClass (GA in 1.34, gate on): a claim and a
// volume match only when they name the same class (unset and "" are the
// same); checkVolumeSatisfyClaim says so for a volume the claim names; a
// binding copies the volume's class into the claim's
// status.currentVolumeAttributesClassName. Same table shape as sync.test.ts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { explainClaim } from "../../shared/binder/explain.ts";
import {
  annBindCompleted as bindCompleted,
  annBoundByController as boundByController,
  classEmpty,
  newClaim,
  newVolume,
  runMultiSync,
  runSyncCase,
  type SyncCase,
  withCurrentVolumeAttributesClass as withCurrent,
  withVolumeAttributesClass as withVac,
} from "./framework.ts";

const Available = "Available";
const Pending = "Pending";
const Bound = "Bound";
const Retain = "Retain";
const fast = "fast";
const slow = "slow";

const cases: (SyncCase & { messages?: string[] })[] = [
  {
    name: "15-1 - same class on claim and volume: bind, the claim's current class is the volume's",
    initialVolumes: [withVac(fast, newVolume("volume15-1", "1Gi", "", "", Available, Retain, classEmpty))],
    expectedVolumes: [
      withVac(
        fast,
        newVolume("volume15-1", "1Gi", "uid15-1", "claim15-1", Bound, Retain, classEmpty, boundByController),
      ),
    ],
    initialClaims: [withVac(fast, newClaim("claim15-1", "uid15-1", "1Gi", "", Pending, undefined))],
    expectedClaims: [
      withCurrent(
        fast,
        withVac(
          fast,
          newClaim(
            "claim15-1",
            "uid15-1",
            "1Gi",
            "volume15-1",
            Bound,
            undefined,
            boundByController,
            bindCompleted,
          ),
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "15-2 - claim names a class, the volume none: no bind",
    initialVolumes: [newVolume("volume15-2", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume15-2", "1Gi", "", "", Available, Retain, classEmpty)],
    initialClaims: [withVac(fast, newClaim("claim15-2", "uid15-2", "1Gi", "", Pending, undefined))],
    expectedClaims: [withVac(fast, newClaim("claim15-2", "uid15-2", "1Gi", "", Pending, undefined))],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
  {
    name: "15-3 - volume has a class, the claim none: no bind",
    initialVolumes: [withVac(fast, newVolume("volume15-3", "1Gi", "", "", Available, Retain, classEmpty))],
    expectedVolumes: [withVac(fast, newVolume("volume15-3", "1Gi", "", "", Available, Retain, classEmpty))],
    initialClaims: [newClaim("claim15-3", "uid15-3", "1Gi", "", Pending, undefined)],
    expectedClaims: [newClaim("claim15-3", "uid15-3", "1Gi", "", Pending, undefined)],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
  {
    name: "15-4 - different classes: no bind",
    initialVolumes: [withVac(slow, newVolume("volume15-4", "1Gi", "", "", Available, Retain, classEmpty))],
    expectedVolumes: [withVac(slow, newVolume("volume15-4", "1Gi", "", "", Available, Retain, classEmpty))],
    initialClaims: [withVac(fast, newClaim("claim15-4", "uid15-4", "1Gi", "", Pending, undefined))],
    expectedClaims: [withVac(fast, newClaim("claim15-4", "uid15-4", "1Gi", "", Pending, undefined))],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
  {
    name: '15-5 - claim asks for "" and the volume has none: nil equals "", bind',
    initialVolumes: [newVolume("volume15-5", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [
      newVolume("volume15-5", "1Gi", "uid15-5", "claim15-5", Bound, Retain, classEmpty, boundByController),
    ],
    initialClaims: [withVac("", newClaim("claim15-5", "uid15-5", "1Gi", "", Pending, undefined))],
    expectedClaims: [
      withVac(
        "",
        newClaim(
          "claim15-5",
          "uid15-5",
          "1Gi",
          "volume15-5",
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
    name: "15-6 - the smaller volume of another class loses to the larger one of the claim's class",
    initialVolumes: [
      withVac(slow, newVolume("volume15-6-1", "1Gi", "", "", Available, Retain, classEmpty)),
      withVac(fast, newVolume("volume15-6-2", "5Gi", "", "", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVac(slow, newVolume("volume15-6-1", "1Gi", "", "", Available, Retain, classEmpty)),
      withVac(
        fast,
        newVolume(
          "volume15-6-2",
          "5Gi",
          "uid15-6",
          "claim15-6",
          Bound,
          Retain,
          classEmpty,
          boundByController,
        ),
      ),
    ],
    initialClaims: [withVac(fast, newClaim("claim15-6", "uid15-6", "1Gi", "", Pending, undefined))],
    expectedClaims: [
      withCurrent(
        fast,
        withVac(fast, {
          ...newClaim(
            "claim15-6",
            "uid15-6",
            "1Gi",
            "volume15-6-2",
            Bound,
            undefined,
            boundByController,
            bindCompleted,
          ),
          status: {
            phase: Bound,
            accessModes: ["ReadWriteOnce", "ReadOnlyMany"],
            capacity: { storage: "5Gi" },
          },
        }),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "15-7 - volume pre-bound to the claim but of another class is not taken (checked before the pre-bound shortcut)",
    initialVolumes: [
      withVac(slow, newVolume("volume15-7", "1Gi", "", "claim15-7", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVac(slow, newVolume("volume15-7", "1Gi", "", "claim15-7", Available, Retain, classEmpty)),
    ],
    initialClaims: [withVac(fast, newClaim("claim15-7", "uid15-7", "1Gi", "", Pending, undefined))],
    expectedClaims: [withVac(fast, newClaim("claim15-7", "uid15-7", "1Gi", "", Pending, undefined))],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
  {
    name: "15-8 - claim names an unclaimed volume of another class: VolumeMismatch, Pending",
    initialVolumes: [withVac(slow, newVolume("volume15-8", "1Gi", "", "", Available, Retain, classEmpty))],
    expectedVolumes: [withVac(slow, newVolume("volume15-8", "1Gi", "", "", Available, Retain, classEmpty))],
    initialClaims: [withVac(fast, newClaim("claim15-8", "uid15-8", "1Gi", "volume15-8", Pending, undefined))],
    expectedClaims: [
      withVac(fast, newClaim("claim15-8", "uid15-8", "1Gi", "volume15-8", Pending, undefined)),
    ],
    expectedEvents: ["Warning VolumeMismatch"],
    messages: ['Cannot bind to requested volume "volume15-8": volumeAttributesClassName does not match'],
    test: "claim",
  },
  {
    name: "15-9 - claim names an unclaimed volume without a class while it asks for one: VolumeMismatch",
    initialVolumes: [newVolume("volume15-9", "1Gi", "", "", Available, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume15-9", "1Gi", "", "", Available, Retain, classEmpty)],
    initialClaims: [withVac(fast, newClaim("claim15-9", "uid15-9", "1Gi", "volume15-9", Pending, undefined))],
    expectedClaims: [
      withVac(fast, newClaim("claim15-9", "uid15-9", "1Gi", "volume15-9", Pending, undefined)),
    ],
    expectedEvents: ["Warning VolumeMismatch"],
    messages: ['Cannot bind to requested volume "volume15-9": volumeAttributesClassName does not match'],
    test: "claim",
  },
  {
    name: "15-10 - storage class is checked before the attributes class",
    initialVolumes: [withVac(slow, newVolume("volume15-10", "1Gi", "", "", Available, Retain, "gold"))],
    expectedVolumes: [withVac(slow, newVolume("volume15-10", "1Gi", "", "", Available, Retain, "gold"))],
    initialClaims: [
      withVac(fast, newClaim("claim15-10", "uid15-10", "1Gi", "volume15-10", Pending, classEmpty)),
    ],
    expectedClaims: [
      withVac(fast, newClaim("claim15-10", "uid15-10", "1Gi", "volume15-10", Pending, classEmpty)),
    ],
    expectedEvents: ["Warning VolumeMismatch"],
    messages: ['Cannot bind to requested volume "volume15-10": storageClassName does not match'],
    test: "claim",
  },
  {
    name: "15-11 - claim names a volume already pointing at it, of another class: bound (upstream checks only unclaimed volumes)",
    initialVolumes: [
      withVac(slow, newVolume("volume15-11", "1Gi", "", "claim15-11", Available, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVac(slow, newVolume("volume15-11", "1Gi", "uid15-11", "claim15-11", Bound, Retain, classEmpty)),
    ],
    initialClaims: [
      withVac(fast, newClaim("claim15-11", "uid15-11", "1Gi", "volume15-11", Pending, undefined)),
    ],
    expectedClaims: [
      withCurrent(
        slow,
        withVac(
          fast,
          newClaim("claim15-11", "uid15-11", "1Gi", "volume15-11", Bound, undefined, bindCompleted),
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "15-12 - bound claim without a current class, its volume has one: the status catches up",
    initialVolumes: [
      withVac(fast, newVolume("volume15-12", "1Gi", "uid15-12", "claim15-12", Bound, Retain, classEmpty)),
    ],
    expectedVolumes: [
      withVac(fast, newVolume("volume15-12", "1Gi", "uid15-12", "claim15-12", Bound, Retain, classEmpty)),
    ],
    initialClaims: [
      withVac(
        fast,
        newClaim("claim15-12", "uid15-12", "1Gi", "volume15-12", Bound, undefined, bindCompleted),
      ),
    ],
    expectedClaims: [
      withCurrent(
        fast,
        withVac(
          fast,
          newClaim("claim15-12", "uid15-12", "1Gi", "volume15-12", Bound, undefined, bindCompleted),
        ),
      ),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "15-13 - bound claim whose volume dropped its class: the current class goes too",
    initialVolumes: [newVolume("volume15-13", "1Gi", "uid15-13", "claim15-13", Bound, Retain, classEmpty)],
    expectedVolumes: [newVolume("volume15-13", "1Gi", "uid15-13", "claim15-13", Bound, Retain, classEmpty)],
    initialClaims: [
      withCurrent(
        fast,
        newClaim("claim15-13", "uid15-13", "1Gi", "volume15-13", Bound, undefined, bindCompleted),
      ),
    ],
    expectedClaims: [
      newClaim("claim15-13", "uid15-13", "1Gi", "volume15-13", Bound, undefined, bindCompleted),
    ],
    expectedEvents: [],
    test: "claim",
  },
  {
    name: "15-14 - claim reset to Pending loses its current class",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [
      withCurrent(fast, withVac(fast, newClaim("claim15-14", "uid15-14", "1Gi", "", Bound, undefined))),
    ],
    expectedClaims: [withVac(fast, newClaim("claim15-14", "uid15-14", "1Gi", "", Pending, undefined))],
    expectedEvents: ["Normal FailedBinding"],
    test: "claim",
  },
];

describe("binder: VolumeAttributesClass", () => {
  for (const c of cases) {
    it(c.name, () => {
      const world = runSyncCase(c);
      if (c.messages) assert.deepEqual(world.eventMessages, c.messages);
    });
  }

  it("a bound claim with a class is stable: a second sync writes nothing", () => {
    const c = cases.find((x) => x.name.startsWith("15-1 "))!;
    const world = runMultiSync(c);
    const before = world.writes;
    for (const claim of [...world.claims.values()]) world.apply(world.syncClaim(claim));
    for (const volume of [...world.volumes.values()]) world.apply(world.syncVolume(volume));
    assert.equal(world.writes, before);
  });

  it("explain names the attributes class as the reason a volume is passed over", () => {
    const claim = withVac(fast, newClaim("c", "uid-c", "1Gi", "", Pending, undefined));
    const volume = withVac(slow, newVolume("v", "1Gi", "", "", Available, Retain, classEmpty));
    const e = explainClaim(claim, { volumes: [volume], classes: [], pods: [], now: "2026-01-01T00:00:00Z" });
    assert.deepEqual(e.volumes, [
      {
        name: "v",
        verdict: "not chosen",
        reason: "volume-attributes-class",
        detail: `volumeAttributesClassName "slow" does not match the claim's "fast"`,
      },
    ]);
    const named = withVac(fast, newClaim("n", "uid-n", "1Gi", "v", Pending, undefined));
    const en = explainClaim(named, { volumes: [volume], classes: [], pods: [], now: "2026-01-01T00:00:00Z" });
    assert.deepEqual(en.volumes, [
      { name: "v", verdict: "not chosen", detail: "volumeAttributesClassName does not match" },
    ]);
  });
});
