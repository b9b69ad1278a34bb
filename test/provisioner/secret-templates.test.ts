// biome-ignore-all lint/suspicious/noTemplateCurlyInString: StorageClass secret templates spell ${...} literally
// Secret template resolution, with upstream's tokens and error texts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  resolveSecretReference,
  resolveSecretReferences,
  type SecretRefResult,
  type SecretTemplateContext,
} from "../../shared/provisioner/secret-templates.ts";

const claimCtx: SecretTemplateContext = {
  pvName: "pvc-1234",
  claim: {
    name: "data",
    namespace: "team-a",
    annotations: { "example.com/secret": "from-annotation", "example.com/bad": "Not_Valid" },
  },
};

interface Case {
  name: string;
  nameTemplate: string;
  namespaceTemplate: string;
  ctx?: SecretTemplateContext;
  want: SecretRefResult;
}

const ok = (name: string, namespace: string): SecretRefResult => ({ ok: true, value: { name, namespace } });
const fail = (error: string): SecretRefResult => ({ ok: false, error });

const cases: Case[] = [
  {
    name: "literal values",
    nameTemplate: "creds",
    namespaceTemplate: "kube-system",
    want: ok("creds", "kube-system"),
  },
  {
    name: "namespace tokens",
    nameTemplate: "creds",
    namespaceTemplate: "${pvc.namespace}",
    want: ok("creds", "team-a"),
  },
  {
    name: "pv name in the namespace",
    nameTemplate: "creds",
    namespaceTemplate: "${pv.name}",
    want: ok("creds", "pvc-1234"),
  },
  {
    name: "every name token",
    nameTemplate: "${pvc.name}-${pvc.namespace}-${pv.name}",
    namespaceTemplate: "ns",
    want: ok("data-team-a-pvc-1234", "ns"),
  },
  {
    name: "annotation token in the name",
    nameTemplate: "${pvc.annotations['example.com/secret']}",
    namespaceTemplate: "${pvc.namespace}",
    want: ok("from-annotation", "team-a"),
  },
  {
    name: "a secret name may be a dotted subdomain",
    nameTemplate: "db.creds",
    namespaceTemplate: "ns",
    want: ok("db.creds", "ns"),
  },
  {
    name: "the claim name is not allowed in the namespace",
    nameTemplate: "creds",
    namespaceTemplate: "${pvc.name}",
    want: fail('error resolving value "${pvc.name}": invalid tokens: ["pvc.name"]'),
  },
  {
    name: "annotations are not allowed in the namespace",
    nameTemplate: "creds",
    namespaceTemplate: "${pvc.annotations['example.com/secret']}",
    want: fail(
      `error resolving value "\${pvc.annotations['example.com/secret']}": invalid tokens: ["pvc.annotations['example.com/secret']"]`,
    ),
  },
  {
    name: "unknown tokens are listed sorted",
    nameTemplate: "${zeta}-${alpha}-${zeta}",
    namespaceTemplate: "ns",
    want: fail('error resolving value "${zeta}-${alpha}-${zeta}": invalid tokens: ["alpha" "zeta"]'),
  },
  {
    name: "bare $name is a token too (os.Expand)",
    nameTemplate: "$secret",
    namespaceTemplate: "ns",
    want: fail('error resolving value "$secret": invalid tokens: ["secret"]'),
  },
  {
    name: "an empty ${} is dropped (os.Expand)",
    nameTemplate: "cre${}ds",
    namespaceTemplate: "ns",
    want: ok("creds", "ns"),
  },
  {
    name: "a missing annotation is an unknown token",
    nameTemplate: "${pvc.annotations['example.com/missing']}",
    namespaceTemplate: "ns",
    want: fail(
      `error resolving value "\${pvc.annotations['example.com/missing']}": invalid tokens: ["pvc.annotations['example.com/missing']"]`,
    ),
  },
  {
    name: "namespace that is not a DNS-1123 label",
    nameTemplate: "creds",
    namespaceTemplate: "Bad_NS",
    want: fail('"Bad_NS" is not a valid namespace name'),
  },
  {
    name: "namespace that resolves to something invalid",
    nameTemplate: "creds",
    namespaceTemplate: "${pvc.namespace}-",
    want: fail('"${pvc.namespace}-" resolved to "team-a-" which is not a valid namespace name'),
  },
  {
    name: "a dotted namespace is not a label",
    nameTemplate: "creds",
    namespaceTemplate: "a.b",
    want: fail('"a.b" is not a valid namespace name'),
  },
  {
    name: "namespace longer than 63",
    nameTemplate: "creds",
    namespaceTemplate: "n".repeat(64),
    want: fail(`"${"n".repeat(64)}" is not a valid namespace name`),
  },
  {
    name: "name that resolves to something invalid",
    nameTemplate: "${pvc.annotations['example.com/bad']}",
    namespaceTemplate: "ns",
    want: fail(
      `"\${pvc.annotations['example.com/bad']}" resolved to "Not_Valid" which is not a valid secret name`,
    ),
  },
  {
    name: "name that is invalid as written",
    nameTemplate: "UPPER",
    namespaceTemplate: "ns",
    want: fail('"UPPER" is not a valid secret name'),
  },
  {
    name: "namespace errors come before name errors",
    nameTemplate: "${nope}",
    namespaceTemplate: "${pvc.name}",
    want: fail('error resolving value "${pvc.name}": invalid tokens: ["pvc.name"]'),
  },
  {
    name: "without a claim only the PV name resolves",
    nameTemplate: "creds",
    namespaceTemplate: "${pvc.namespace}",
    ctx: { pvName: "pvc-1" },
    want: fail('error resolving value "${pvc.namespace}": invalid tokens: ["pvc.namespace"]'),
  },
  {
    name: "a claim with name and namespace only (deletion) cannot resolve annotations",
    nameTemplate: "${pvc.annotations['example.com/secret']}",
    namespaceTemplate: "${pvc.namespace}",
    ctx: { pvName: "pvc-1", claim: { name: "data", namespace: "team-a" } },
    want: fail(
      `error resolving value "\${pvc.annotations['example.com/secret']}": invalid tokens: ["pvc.annotations['example.com/secret']"]`,
    ),
  },
];

describe("resolveSecretReference", () => {
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(
        resolveSecretReference(
          { nameTemplate: c.nameTemplate, namespaceTemplate: c.namespaceTemplate },
          c.ctx ?? claimCtx,
        ),
        c.want,
      );
    });
  }
});

describe("resolveSecretReferences", () => {
  it("resolves every kind that has a template", () => {
    assert.deepEqual(
      resolveSecretReferences(
        {
          provisioner: { nameTemplate: "prov", namespaceTemplate: "${pvc.namespace}" },
          nodePublish: { nameTemplate: "${pvc.name}-np", namespaceTemplate: "ns" },
        },
        claimCtx,
      ),
      {
        ok: true,
        value: {
          provisioner: { name: "prov", namespace: "team-a" },
          nodePublish: { name: "data-np", namespace: "ns" },
        },
      },
    );
  });

  it("stops at the first kind in upstream's order that fails", () => {
    assert.deepEqual(
      resolveSecretReferences(
        {
          nodeExpand: { nameTemplate: "${x}", namespaceTemplate: "ns" },
          controllerPublish: { nameTemplate: "${y}", namespaceTemplate: "ns" },
        },
        claimCtx,
      ),
      { ok: false, error: 'error resolving value "${y}": invalid tokens: ["y"]' },
    );
  });
});
