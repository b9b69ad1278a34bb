import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  fieldsOf,
  type LabelRequirement,
  matchesFieldRequirements,
  matchesLabelRequirements,
  parseFieldSelectorString,
  parseLabelSelectorString,
  SelectorParseError,
  supportedFieldSelectors,
} from "../../sandbox/apiserver/selectors.ts";

describe("parseLabelSelectorString", () => {
  const cases: Array<{ selector: string; expected: LabelRequirement[] }> = [
    { selector: "", expected: [] },
    { selector: "   ", expected: [] },
    { selector: "a=b", expected: [{ key: "a", operator: "Equals", values: ["b"] }] },
    { selector: "a==b", expected: [{ key: "a", operator: "Equals", values: ["b"] }] },
    { selector: "a!=b", expected: [{ key: "a", operator: "NotEquals", values: ["b"] }] },
    { selector: "a=", expected: [{ key: "a", operator: "Equals", values: [""] }] },
    { selector: "a in (x,y)", expected: [{ key: "a", operator: "In", values: ["x", "y"] }] },
    { selector: "a notin (x)", expected: [{ key: "a", operator: "NotIn", values: ["x"] }] },
    { selector: "a in ()", expected: [{ key: "a", operator: "In", values: [""] }] },
    { selector: "a in (x,,x)", expected: [{ key: "a", operator: "In", values: ["x", ""] }] },
    { selector: "a in (x,)", expected: [{ key: "a", operator: "In", values: ["x", ""] }] },
    { selector: "a", expected: [{ key: "a", operator: "Exists", values: [] }] },
    { selector: "!a", expected: [{ key: "a", operator: "DoesNotExist", values: [] }] },
    { selector: "a>1", expected: [{ key: "a", operator: "GreaterThan", values: ["1"] }] },
    { selector: "a<10", expected: [{ key: "a", operator: "LessThan", values: ["10"] }] },
    { selector: "a=in", expected: [{ key: "a", operator: "Equals", values: ["in"] }] },
    { selector: "a in (notin)", expected: [{ key: "a", operator: "In", values: ["notin"] }] },
    {
      selector: "example.com/tier=gold",
      expected: [{ key: "example.com/tier", operator: "Equals", values: ["gold"] }],
    },
    {
      selector: " a = b ,\tc in( x , y ) , !d,e ,f!=g ",
      expected: [
        { key: "a", operator: "Equals", values: ["b"] },
        { key: "c", operator: "In", values: ["x", "y"] },
        { key: "d", operator: "DoesNotExist", values: [] },
        { key: "e", operator: "Exists", values: [] },
        { key: "f", operator: "NotEquals", values: ["g"] },
      ],
    },
    {
      selector: "a=,b",
      expected: [
        { key: "a", operator: "Equals", values: [""] },
        { key: "b", operator: "Exists", values: [] },
      ],
    },
  ];
  for (const { selector, expected } of cases) {
    it(`parses ${JSON.stringify(selector)}`, () => {
      assert.deepEqual(parseLabelSelectorString(selector), expected);
    });
  }

  const errors: Array<{ selector: string; message: RegExp }> = [
    { selector: "a=b,", message: /found end of string, expected a label key/ },
    { selector: ",a", message: /found ',' at position 0, expected a label key/ },
    { selector: "a b", message: /found 'b' at position 2, expected one of '=', '==', '!=', 'in', 'notin'/ },
    { selector: "a=b=c", message: /found '=' at position 3, expected ',' or end of string/ },
    { selector: "a=(b)", message: /found '\(' at position 2, expected a label value/ },
    { selector: "a in x", message: /found 'x' at position 5, expected '\('/ },
    { selector: "a in (x", message: /found end of string, expected a label value, ',' or '\)'/ },
    { selector: "a in (x y)", message: /found 'y' at position 8/ },
    { selector: "!", message: /found end of string, expected a label key/ },
    { selector: "!a=b", message: /found '=' at position 2, expected ',' or end of string/ },
    { selector: "in=b", message: /found 'in' at position 0, expected a label key/ },
    { selector: "a>x", message: /must be an integer/ },
    { selector: "a>", message: /must be an integer/ },
    { selector: "a<-1", message: /invalid label value "-1"/ },
    { selector: "-a=b", message: /invalid label key "-a"/ },
    { selector: "a=b-", message: /invalid label value "b-"/ },
    { selector: "a in (ok,bad-)", message: /invalid label value "bad-"/ },
    { selector: "a=b!", message: /found '!' at position 3/ },
  ];
  for (const { selector, message } of errors) {
    it(`rejects ${JSON.stringify(selector)}`, () => {
      assert.throws(
        () => parseLabelSelectorString(selector),
        (error: unknown) => {
          assert.ok(error instanceof SelectorParseError);
          assert.equal(error.selector, selector);
          assert.match(error.message, /^unable to parse label selector /);
          assert.match(error.message, message);
          return true;
        },
      );
    });
  }
});

describe("matchesLabelRequirements", () => {
  const labels = { tier: "gold", zone: "a", n: "5" };
  const cases: Array<{ selector: string; labels?: Record<string, string>; expected: boolean }> = [
    { selector: "", expected: true },
    { selector: "", labels: {}, expected: true },
    { selector: "tier=gold", expected: true },
    { selector: "tier==silver", expected: false },
    { selector: "rack=1", expected: false },
    { selector: "tier!=silver", expected: true },
    { selector: "tier!=gold", expected: false },
    { selector: "rack!=1", expected: true },
    { selector: "zone in (a,b)", expected: true },
    { selector: "zone in (b)", expected: false },
    { selector: "rack in (1)", expected: false },
    { selector: "zone notin (a)", expected: false },
    { selector: "zone notin (b)", expected: true },
    { selector: "rack notin (1)", expected: true },
    { selector: "tier", expected: true },
    { selector: "rack", expected: false },
    { selector: "!rack", expected: true },
    { selector: "!tier", expected: false },
    { selector: "n>4", expected: true },
    { selector: "n<4", expected: false },
    { selector: "tier>1", expected: false },
    { selector: "tier=gold,zone=a", expected: true },
    { selector: "tier=gold,zone=b", expected: false },
    { selector: "tier=gold", labels: {}, expected: false },
    { selector: "!tier", expected: false },
    { selector: "rack=", labels: { rack: "" }, expected: true },
    { selector: "rack=", labels: {}, expected: false },
  ];
  for (const { selector, labels: own, expected } of cases) {
    it(`${JSON.stringify(selector)} on ${own === undefined ? "the default labels" : JSON.stringify(own)}`, () => {
      assert.equal(matchesLabelRequirements(parseLabelSelectorString(selector), own ?? labels), expected);
    });
  }

  it("treats undefined labels as empty", () => {
    assert.equal(matchesLabelRequirements(parseLabelSelectorString("!a,b!=c"), undefined), true);
    assert.equal(matchesLabelRequirements(parseLabelSelectorString("a"), undefined), false);
  });
});

describe("parseFieldSelectorString", () => {
  const supported = ["metadata.name", "metadata.namespace", "spec.nodeName"];
  const cases: Array<{ selector: string; expected: ReturnType<typeof parseFieldSelectorString> }> = [
    { selector: "", expected: [] },
    { selector: "metadata.name=a", expected: [{ field: "metadata.name", operator: "Equals", value: "a" }] },
    { selector: "metadata.name==a", expected: [{ field: "metadata.name", operator: "Equals", value: "a" }] },
    {
      selector: "metadata.name!=a",
      expected: [{ field: "metadata.name", operator: "NotEquals", value: "a" }],
    },
    { selector: "spec.nodeName=", expected: [{ field: "spec.nodeName", operator: "Equals", value: "" }] },
    {
      selector: "metadata.name=a,spec.nodeName!=n1,",
      expected: [
        { field: "metadata.name", operator: "Equals", value: "a" },
        { field: "spec.nodeName", operator: "NotEquals", value: "n1" },
      ],
    },
    {
      selector: " metadata.namespace = ns , metadata.name=x",
      expected: [
        { field: "metadata.namespace", operator: "Equals", value: "ns" },
        { field: "metadata.name", operator: "Equals", value: "x" },
      ],
    },
    {
      selector: "metadata.name=a\\,b\\=c\\\\d",
      expected: [{ field: "metadata.name", operator: "Equals", value: "a,b=c\\d" }],
    },
    {
      selector: "metadata.name=a!b",
      expected: [{ field: "metadata.name", operator: "Equals", value: "a!b" }],
    },
  ];
  for (const { selector, expected } of cases) {
    it(`parses ${JSON.stringify(selector)}`, () => {
      assert.deepEqual(parseFieldSelectorString(selector, supported), expected);
    });
  }

  const errors: Array<{ selector: string; message: string | RegExp }> = [
    { selector: "status.phase=Running", message: "field label not supported: status.phase" },
    { selector: "=x", message: "field label not supported: " },
    { selector: "metadata.name", message: /can't understand "metadata.name"/ },
    { selector: "metadata.name in (a)", message: /can't understand/ },
    { selector: "metadata.name=a=b", message: /unescaped '=' in value "a=b"/ },
    { selector: "metadata.name==a=b", message: /unescaped '=' in value "a=b"/ },
    { selector: "metadata.name=a\\x", message: /invalid escape sequence/ },
  ];
  for (const { selector, message } of errors) {
    it(`rejects ${JSON.stringify(selector)}`, () => {
      assert.throws(
        () => parseFieldSelectorString(selector, supported),
        (error: unknown) => {
          assert.ok(error instanceof SelectorParseError);
          if (typeof message === "string") assert.equal(error.message, message);
          else assert.match(error.message, message);
          return true;
        },
      );
    });
  }
});

describe("matchesFieldRequirements", () => {
  const fields = { "metadata.name": "pv-1", "spec.nodeName": "" };
  const cases: Array<{ selector: string; expected: boolean }> = [
    { selector: "", expected: true },
    { selector: "metadata.name=pv-1", expected: true },
    { selector: "metadata.name=pv-2", expected: false },
    { selector: "metadata.name!=pv-2", expected: true },
    { selector: "metadata.name!=pv-1", expected: false },
    { selector: "spec.nodeName=", expected: true },
    { selector: "spec.nodeName!=", expected: false },
    { selector: "metadata.namespace=", expected: true },
    { selector: "metadata.namespace!=default", expected: true },
    { selector: "metadata.namespace=default", expected: false },
    { selector: "metadata.name=pv-1,spec.nodeName=n1", expected: false },
  ];
  const supported = ["metadata.name", "metadata.namespace", "spec.nodeName"];
  for (const { selector, expected } of cases) {
    it(JSON.stringify(selector), () => {
      assert.equal(matchesFieldRequirements(parseFieldSelectorString(selector, supported), fields), expected);
    });
  }
});

describe("supportedFieldSelectors and fieldsOf", () => {
  it("lists the common fields for every resource", () => {
    for (const resource of ["persistentvolumeclaims", "persistentvolumes", "volumeattachments", "unknown"]) {
      assert.deepEqual(supportedFieldSelectors(resource), ["metadata.name", "metadata.namespace"]);
    }
  });

  it("lists resource-specific fields", () => {
    assert.ok(supportedFieldSelectors("pods").includes("spec.nodeName"));
    assert.ok(supportedFieldSelectors("pods").includes("status.phase"));
    assert.ok(supportedFieldSelectors("events").includes("involvedObject.uid"));
    assert.deepEqual(supportedFieldSelectors("nodes"), [
      "metadata.name",
      "metadata.namespace",
      "spec.unschedulable",
    ]);
    assert.deepEqual(supportedFieldSelectors("secrets"), ["metadata.name", "metadata.namespace", "type"]);
    assert.deepEqual(supportedFieldSelectors("namespaces"), [
      "metadata.name",
      "metadata.namespace",
      "status.phase",
    ]);
  });

  it("reads pod fields", () => {
    const pod = {
      metadata: { name: "p", namespace: "ns" },
      spec: { nodeName: "n1", restartPolicy: "Always", hostNetwork: true },
      status: { phase: "Running", podIP: "10.0.0.1" },
    };
    assert.deepEqual(fieldsOf("pods", pod), {
      "metadata.name": "p",
      "metadata.namespace": "ns",
      "spec.nodeName": "n1",
      "spec.restartPolicy": "Always",
      "spec.schedulerName": "",
      "spec.serviceAccountName": "",
      "spec.hostNetwork": "true",
      "status.phase": "Running",
      "status.podIP": "10.0.0.1",
      "status.nominatedNodeName": "",
    });
  });

  it("reads event fields", () => {
    const event = {
      metadata: { name: "e", namespace: "ns" },
      involvedObject: {
        kind: "PersistentVolumeClaim",
        name: "c",
        namespace: "ns",
        uid: "u1",
        apiVersion: "v1",
      },
      reason: "ProvisioningSucceeded",
      type: "Normal",
      source: { component: "csi-provisioner" },
    };
    const fields = fieldsOf("events", event);
    assert.equal(fields["involvedObject.kind"], "PersistentVolumeClaim");
    assert.equal(fields["involvedObject.name"], "c");
    assert.equal(fields["involvedObject.namespace"], "ns");
    assert.equal(fields["involvedObject.uid"], "u1");
    assert.equal(fields.reason, "ProvisioningSucceeded");
    assert.equal(fields.type, "Normal");
    assert.equal(fields.source, "csi-provisioner");
    assert.equal(fields["involvedObject.fieldPath"], "");
    const selector = "involvedObject.kind=PersistentVolumeClaim,involvedObject.name=c,reason!=Failed";
    const requirements = parseFieldSelectorString(selector, supportedFieldSelectors("events"));
    assert.equal(matchesFieldRequirements(requirements, fields), true);
  });

  it("reads node, secret and namespace fields", () => {
    assert.deepEqual(fieldsOf("nodes", { metadata: { name: "n1" } }), {
      "metadata.name": "n1",
      "metadata.namespace": "",
      "spec.unschedulable": "false",
    });
    assert.equal(
      fieldsOf("nodes", { metadata: { name: "n1" }, spec: { unschedulable: true } })["spec.unschedulable"],
      "true",
    );
    assert.equal(fieldsOf("secrets", { metadata: { name: "s" }, type: "Opaque" }).type, "Opaque");
    assert.equal(
      fieldsOf("namespaces", { metadata: { name: "d" }, status: { phase: "Active" } })["status.phase"],
      "Active",
    );
  });

  it("tolerates missing and odd-shaped fields", () => {
    assert.deepEqual(fieldsOf("persistentvolumeclaims", {}), {
      "metadata.name": "",
      "metadata.namespace": "",
    });
    assert.deepEqual(
      fieldsOf("pods", { metadata: "x", spec: null, status: { phase: { x: 1 } } })["status.phase"],
      "",
    );
    assert.equal(fieldsOf("persistentvolumes", { metadata: { name: "pv" } })["metadata.name"], "pv");
  });

  it("rejects pod fields on other resources", () => {
    assert.throws(
      () => parseFieldSelectorString("spec.nodeName=n1", supportedFieldSelectors("persistentvolumeclaims")),
      { message: "field label not supported: spec.nodeName" },
    );
  });
});
