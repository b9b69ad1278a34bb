// Resolving a StorageClass secret template (`${pvc.namespace}`, ...) into the
// SecretReference it names, as upstream's getSecretReference does. Every
// secret kind accepts the same tokens (upstream passes the full claim for all
// of them since the fix for external-provisioner#1148); what differs is the
// claim the caller can offer: at deletion time only the PV's claimRef name and
// namespace are known, so annotation tokens cannot resolve there.
import type { SecretTemplate, SecretTemplates } from "./class-parameters.ts";
import { type SecretKind, secretKinds } from "./class-parameters.ts";
import { compareStrings, goQuote, goQuoteList } from "./go-format.ts";

export interface SecretRef {
  name: string;
  namespace: string;
}

/** What a template may refer to. */
export interface SecretTemplateContext {
  pvName: string;
  /** The claim (name, namespace, annotations); absent, only `${pv.name}` resolves. */
  claim?: { name: string; namespace?: string; annotations?: Readonly<Record<string, string>> };
}

export type SecretRefResult = { ok: true; value: SecretRef } | { ok: false; error: string };

const tokenPvName = "pv.name";
const tokenPvcName = "pvc.name";
const tokenPvcNamespace = "pvc.namespace";

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function isDns1123Label(s: string): boolean {
  return s.length <= 63 && dns1123Label.test(s);
}

export function isDns1123Subdomain(s: string): boolean {
  return s.length <= 253 && dns1123Subdomain.test(s);
}

/** A template resolved, and its value checked as a `what` ("secret name"), with upstream's error texts. */
function resolveValid(
  template: string,
  params: ReadonlyMap<string, string>,
  valid: (value: string) => boolean,
  what: string,
): { ok: true; value: string } | { ok: false; error: string } {
  const resolved = resolveTemplate(template, params);
  if (!resolved.ok)
    return { ok: false, error: `error resolving value ${goQuote(template)}: ${resolved.error}` };
  if (valid(resolved.value)) return resolved;
  return {
    ok: false,
    error:
      template !== resolved.value
        ? `${goQuote(template)} resolved to ${goQuote(resolved.value)} which is not a valid ${what}`
        : `${goQuote(template)} is not a valid ${what}`,
  };
}

export function resolveSecretReference(
  template: SecretTemplate,
  ctx: SecretTemplateContext,
): SecretRefResult {
  const { nameTemplate, namespaceTemplate } = template;

  // The namespace may only use what the claim's user does not control: the PV name and the claim's namespace.
  const namespaceParams = new Map<string, string>([[tokenPvName, ctx.pvName]]);
  if (ctx.claim) namespaceParams.set(tokenPvcNamespace, ctx.claim.namespace ?? "");
  const namespace = resolveValid(namespaceTemplate, namespaceParams, isDns1123Label, "namespace name");
  if (!namespace.ok) return namespace;

  // The name may also use the claim's name and annotations.
  const nameParams = new Map<string, string>([[tokenPvName, ctx.pvName]]);
  if (ctx.claim) {
    nameParams.set(tokenPvcName, ctx.claim.name);
    nameParams.set(tokenPvcNamespace, ctx.claim.namespace ?? "");
    for (const [key, value] of Object.entries(ctx.claim.annotations ?? {})) {
      nameParams.set(`pvc.annotations['${key}']`, value);
    }
  }
  const name = resolveValid(nameTemplate, nameParams, isDns1123Subdomain, "secret name");
  if (!name.ok) return name;

  return { ok: true, value: { name: name.value, namespace: namespace.value } };
}

export type SecretRefsResult =
  | { ok: true; value: Partial<Record<SecretKind, SecretRef>> }
  | { ok: false; error: string };

/** Every kind that has a template, in upstream's order, stopping at the first error as upstream does. */
export function resolveSecretReferences(
  templates: SecretTemplates,
  ctx: SecretTemplateContext,
): SecretRefsResult {
  const refs: Partial<Record<SecretKind, SecretRef>> = {};
  for (const kind of secretKinds) {
    const template = templates[kind];
    if (!template) continue;
    const ref = resolveSecretReference(template, ctx);
    if (!ref.ok) return ref;
    refs[kind] = ref.value;
  }
  return { ok: true, value: refs };
}

type Resolved = { ok: true; value: string } | { ok: false; error: string };

/** Go's os.Expand over the params, collecting every token it cannot resolve (sorted, as upstream reports them). */
export function resolveTemplate(template: string, params: ReadonlyMap<string, string>): Resolved {
  const missing = new Set<string>();
  const value = goExpand(template, (token) => {
    const v = params.get(token);
    if (v === undefined) missing.add(token);
    return v ?? "";
  });
  if (missing.size > 0)
    return { ok: false, error: `invalid tokens: ${goQuoteList([...missing].sort(compareStrings))}` };
  return { ok: true, value };
}

/**
 * os.Expand: `${name}` and `$name` are replaced; `${}` and an unclosed `${` are
 * eaten; a `$` followed by nothing nameable stays. Reproduced exactly because
 * it decides which templates are valid.
 */
function goExpand(s: string, mapping: (name: string) => string): string {
  let out = "";
  let i = 0;
  for (let j = 0; j < s.length; j++) {
    if (s[j] === "$" && j + 1 < s.length) {
      out += s.slice(i, j);
      const [name, width] = shellName(s.slice(j + 1));
      if (name === "" && width > 0) {
        // Invalid syntax: the characters are dropped.
      } else if (name === "") {
        out += "$";
      } else {
        out += mapping(name);
      }
      j += width;
      i = j + 1;
    }
  }
  return out + s.slice(i);
}

function isShellSpecial(c: string | undefined): boolean {
  return c !== undefined && "*#$@!?-0123456789".includes(c);
}

function isAlphaNum(c: string | undefined): boolean {
  return c !== undefined && /^[A-Za-z0-9_]$/.test(c);
}

function shellName(s: string): [string, number] {
  if (s[0] === "{") {
    if (s.length > 2 && isShellSpecial(s[1]) && s[2] === "}") return [s.slice(1, 2), 3];
    for (let i = 1; i < s.length; i++) {
      if (s[i] === "}") {
        if (i === 1) return ["", 2];
        return [s.slice(1, i), i + 1];
      }
    }
    return ["", 1];
  }
  if (isShellSpecial(s[0])) return [s.slice(0, 1), 1];
  let i = 0;
  while (i < s.length && isAlphaNum(s[i])) i++;
  return [s.slice(0, i), i];
}
