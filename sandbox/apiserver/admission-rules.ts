// Which webhooks a request goes to: kube-apiserver's matching of
// admissionregistration.k8s.io/v1 webhooks (rules, namespaceSelector,
// objectSelector), read from the stored configuration objects.
//
// Not modelled: matchPolicy Equivalent (a rule for another version of the same
// resource; the sandbox serves one version of each), and matchConditions (CEL
// expressions): webhooks with matchConditions are called as if every
// condition were true.

import { type LabelSelectorLike, labelSelectorMatches } from "../../shared/kube/label-selector.ts";
import type { ResourceType } from "./resources.ts";
import type { KubeObject } from "./store.ts";

export type Operation = "CREATE" | "UPDATE" | "DELETE" | "CONNECT";

/** What is being admitted, as far as matching cares. */
export interface MatchAttributes {
  operation: Operation;
  type: ResourceType;
  subresource: string | undefined;
  /** The object's namespace; for a Namespace itself, its name (as kube-apiserver sets it). */
  namespace: string | undefined;
  object: KubeObject | undefined;
  oldObject: KubeObject | undefined;
}

export interface RuleWithOperations {
  operations?: string[];
  apiGroups?: string[];
  apiVersions?: string[];
  resources?: string[];
  /** "*" (default), "Cluster" or "Namespaced". */
  scope?: string;
}

export interface WebhookClientConfig {
  url?: string;
  service?: { namespace?: string; name?: string; path?: string; port?: number };
  /** base64 of PEM CA certificates. */
  caBundle?: string;
}

/** One entry of a configuration's `webhooks`, as stored (unchecked JSON). */
export interface Webhook {
  name?: string;
  clientConfig?: WebhookClientConfig;
  rules?: RuleWithOperations[];
  failurePolicy?: string;
  sideEffects?: string;
  timeoutSeconds?: number;
  namespaceSelector?: LabelSelectorLike | null;
  objectSelector?: LabelSelectorLike | null;
  admissionReviewVersions?: string[];
  reinvocationPolicy?: string;
  matchConditions?: unknown[];
}

/** A webhook with the configuration it came from. */
export interface RegisteredWebhook {
  configuration: string;
  webhook: Webhook;
}

function listMatches(list: readonly string[] | undefined, value: string): boolean {
  return (list ?? []).some((entry) => entry === "*" || entry === value);
}

/** "pods/status" -> ["pods", "status"]; "pods" -> ["pods", ""]. */
function splitResource(entry: string): [string, string] {
  const slash = entry.indexOf("/");
  return slash === -1 ? [entry, ""] : [entry.slice(0, slash), entry.slice(slash + 1)];
}

function resourceMatches(rule: RuleWithOperations, attrs: MatchAttributes): boolean {
  const sub = attrs.subresource ?? "";
  return (rule.resources ?? []).some((entry) => {
    const [res, entrySub] = splitResource(entry);
    // As upstream: "*" alone means every resource but no subresources; "x/*"
    // means x and all its subresources; "*/*" everything.
    return (res === "*" || res === attrs.type.plural) && (entrySub === "*" || entrySub === sub);
  });
}

function scopeMatches(rule: RuleWithOperations, attrs: MatchAttributes): boolean {
  const scope = rule.scope ?? "*";
  if (scope === "*") return true;
  const isNamespace = attrs.type.group === "" && attrs.type.plural === "namespaces";
  if (scope === "Namespaced") return !isNamespace && attrs.type.namespaced;
  if (scope === "Cluster") return isNamespace || !attrs.type.namespaced;
  return false;
}

export function ruleMatches(rule: RuleWithOperations, attrs: MatchAttributes): boolean {
  return (
    listMatches(rule.operations, attrs.operation) &&
    listMatches(rule.apiGroups, attrs.type.group) &&
    listMatches(rule.apiVersions, attrs.type.version) &&
    resourceMatches(rule, attrs) &&
    scopeMatches(rule, attrs)
  );
}

/** An absent or empty selector selects everything (the v1 default is `{}`). */
function selects(
  selector: LabelSelectorLike | null | undefined,
  labels: Record<string, string> | undefined,
): boolean {
  if (selector === undefined || selector === null) return true;
  return labelSelectorMatches(selector, labels ?? {});
}

/**
 * namespaceSelector: cluster-scoped objects other than Namespaces are never
 * exempted; a Namespace is matched on its own labels; anything else on the
 * labels of its namespace.
 */
export function namespaceSelectorMatches(
  webhook: Webhook,
  attrs: MatchAttributes,
  namespaceLabels: (name: string) => Record<string, string> | undefined,
): boolean {
  const isNamespace = attrs.type.group === "" && attrs.type.plural === "namespaces";
  if (isNamespace) {
    const own = attrs.object?.metadata.labels ?? attrs.oldObject?.metadata.labels;
    return selects(webhook.namespaceSelector, own);
  }
  if (!attrs.type.namespaced || attrs.namespace === undefined) return true;
  return selects(webhook.namespaceSelector, namespaceLabels(attrs.namespace));
}

/** objectSelector: the new object or the old one must match (either suffices, as upstream). */
export function objectSelectorMatches(webhook: Webhook, attrs: MatchAttributes): boolean {
  const selector = webhook.objectSelector;
  if (selector === undefined || selector === null) return true;
  return [attrs.object, attrs.oldObject].some(
    (o) => o !== undefined && labelSelectorMatches(selector, o.metadata.labels ?? {}),
  );
}

export function webhookMatches(
  webhook: Webhook,
  attrs: MatchAttributes,
  namespaceLabels: (name: string) => Record<string, string> | undefined,
): boolean {
  return (
    (webhook.rules ?? []).some((rule) => ruleMatches(rule, attrs)) &&
    namespaceSelectorMatches(webhook, attrs, namespaceLabels) &&
    objectSelectorMatches(webhook, attrs)
  );
}

/** Webhooks of the given configurations in kube-apiserver's order: configurations by name, then as listed. */
export function webhooksOf(configurations: readonly KubeObject[]): RegisteredWebhook[] {
  return [...configurations]
    .sort((a, b) => ((a.metadata.name ?? "") < (b.metadata.name ?? "") ? -1 : 1))
    .flatMap((configuration) =>
      (Array.isArray(configuration.webhooks) ? (configuration.webhooks as Webhook[]) : []).map((webhook) => ({
        configuration: configuration.metadata.name ?? "",
        webhook,
      })),
    );
}
