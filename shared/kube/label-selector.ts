// Structured label selectors (metav1.LabelSelector) with Kubernetes semantics, plus the
// requirement model and label key/value validation shared with the string selector parser
// of the sandbox API server.

import { isRecord } from "../is-record.ts";

/** One `matchExpressions` entry; structurally compatible with V1LabelSelectorRequirement. */
export interface LabelSelectorRequirementLike {
  readonly key: string;
  readonly operator: string;
  readonly values?: readonly string[] | null;
}

/** Structurally compatible with V1LabelSelector from @kubernetes/client-node. */
export interface LabelSelectorLike {
  readonly matchLabels?: Readonly<Record<string, string>> | null;
  readonly matchExpressions?: readonly LabelSelectorRequirementLike[] | null;
}

export type LabelOperator =
  | "Equals"
  | "NotEquals"
  | "In"
  | "NotIn"
  | "Exists"
  | "DoesNotExist"
  | "GreaterThan"
  | "LessThan";

/** A single parsed, validated requirement; a selector is the AND of its requirements. */
export interface LabelRequirement {
  readonly key: string;
  readonly operator: LabelOperator;
  readonly values: readonly string[];
}

const NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const MAX_NAME_PART = 63;
const MAX_PREFIX = 253;

/** Checks a label key (an optional DNS-subdomain prefix and "/" before a name). */
export function validateLabelKey(key: string): string | undefined {
  const slash = key.indexOf("/");
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined) {
    if (prefix === "") return `invalid label key "${key}": prefix part must be non-empty`;
    if (prefix.length > MAX_PREFIX || !DNS1123_SUBDOMAIN.test(prefix)) {
      return `invalid label key "${key}": prefix part must be a lowercase DNS subdomain of at most ${MAX_PREFIX} characters`;
    }
  }
  if (name === "") return `invalid label key "${key}": name part must be non-empty`;
  if (name.length > MAX_NAME_PART) {
    return `invalid label key "${key}": name part must be at most ${MAX_NAME_PART} characters`;
  }
  if (!NAME_PART.test(name)) {
    return `invalid label key "${key}": name part must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric`;
  }
  return undefined;
}

/** Checks a label value: empty, or up to 63 characters of the name-part alphabet. */
export function validateLabelValue(value: string): string | undefined {
  if (value === "") return undefined;
  if (value.length > MAX_NAME_PART) {
    return `invalid label value "${value}": must be at most ${MAX_NAME_PART} characters`;
  }
  if (!NAME_PART.test(value)) {
    return `invalid label value "${value}": must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric`;
  }
  return undefined;
}

function labelValue(labels: Readonly<Record<string, string>> | undefined, key: string): string | undefined {
  // Own properties only: a plain object would otherwise "have" labels such as "constructor".
  if (labels === undefined || labels === null || !Object.hasOwn(labels, key)) return undefined;
  const value: unknown = labels[key];
  return typeof value === "string" ? value : undefined;
}

function parseInteger(value: string): number | undefined {
  return /^[-+]?\d+$/.test(value) ? Number(value) : undefined;
}

function compareInteger(
  labelValue: string | undefined,
  bound: string | undefined,
  greater: boolean,
): boolean {
  if (labelValue === undefined || bound === undefined) return false;
  const have = parseInteger(labelValue);
  const limit = parseInteger(bound);
  if (have === undefined || limit === undefined) return false;
  return greater ? have > limit : have < limit;
}

/** Kubernetes semantics: NotEquals and NotIn also match objects that lack the label. */
export function requirementMatches(
  requirement: LabelRequirement,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  const value = labelValue(labels, requirement.key);
  switch (requirement.operator) {
    case "Equals":
    case "In":
      return value !== undefined && requirement.values.includes(value);
    case "NotEquals":
    case "NotIn":
      return value === undefined || !requirement.values.includes(value);
    case "Exists":
      return value !== undefined;
    case "DoesNotExist":
      return value === undefined;
    case "GreaterThan":
      return compareInteger(value, requirement.values[0], true);
    case "LessThan":
      return compareInteger(value, requirement.values[0], false);
  }
}

export function requirementsMatch(
  requirements: readonly LabelRequirement[],
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  return requirements.every((requirement) => requirementMatches(requirement, labels));
}

function validateMatchLabels(matchLabels: unknown): string[] {
  if (matchLabels === undefined || matchLabels === null) return [];
  if (!isRecord(matchLabels)) return ["matchLabels: must be a map of string keys to string values"];
  const errors: string[] = [];
  for (const [key, value] of Object.entries(matchLabels)) {
    const keyError = validateLabelKey(key);
    if (keyError !== undefined) errors.push(`matchLabels: ${keyError}`);
    if (typeof value !== "string") {
      errors.push(`matchLabels[${key}]: value must be a string`);
      continue;
    }
    const valueError = validateLabelValue(value);
    if (valueError !== undefined) errors.push(`matchLabels[${key}]: ${valueError}`);
  }
  return errors;
}

function validateExpressionValues(field: string, values: unknown): { errors: string[]; count: number } {
  if (values === undefined || values === null) return { errors: [], count: 0 };
  if (!Array.isArray(values)) return { errors: [`${field}.values: must be a list of strings`], count: 0 };
  const errors: string[] = [];
  values.forEach((value: unknown, index) => {
    if (typeof value !== "string") {
      errors.push(`${field}.values[${index}]: must be a string`);
      return;
    }
    const valueError = validateLabelValue(value);
    if (valueError !== undefined) errors.push(`${field}.values[${index}]: ${valueError}`);
  });
  return { errors, count: values.length };
}

function validateExpression(expression: unknown, index: number): string[] {
  const field = `matchExpressions[${index}]`;
  if (!isRecord(expression)) return [`${field}: must be an object with key, operator and values`];
  const errors: string[] = [];
  const { key, operator } = expression;
  if (typeof key !== "string") {
    errors.push(`${field}.key: must be a string`);
  } else {
    const keyError = validateLabelKey(key);
    if (keyError !== undefined) errors.push(`${field}.key: ${keyError}`);
  }
  const values = validateExpressionValues(field, expression.values);
  errors.push(...values.errors);
  if (operator === "In" || operator === "NotIn") {
    if (values.count === 0) errors.push(`${field}.values: must be non-empty when operator is ${operator}`);
  } else if (operator === "Exists" || operator === "DoesNotExist") {
    if (values.count > 0) errors.push(`${field}.values: must be empty when operator is ${operator}`);
  } else {
    errors.push(
      `${field}.operator: unsupported operator ${JSON.stringify(operator)} (must be In, NotIn, Exists or DoesNotExist)`,
    );
  }
  return errors;
}

/**
 * Error messages for an invalid selector; empty when valid. A null selector is valid (it is
 * "no selector"; what that means is up to the caller). Checks the runtime shape too, because
 * selectors usually arrive as unchecked JSON.
 */
export function validateLabelSelector(selector: LabelSelectorLike | undefined | null): string[] {
  if (selector === undefined || selector === null) return [];
  const raw: unknown = selector;
  if (!isRecord(raw)) return ["selector: must be an object"];
  const errors = validateMatchLabels(raw.matchLabels);
  const expressions = raw.matchExpressions;
  if (expressions === undefined || expressions === null) return errors;
  if (!Array.isArray(expressions)) return [...errors, "matchExpressions: must be a list"];
  expressions.forEach((expression: unknown, index) => {
    errors.push(...validateExpression(expression, index));
  });
  return errors;
}

/** Converts a valid selector into requirements (matchLabels become Equals). */
function selectorRequirements(selector: LabelSelectorLike): LabelRequirement[] {
  const requirements: LabelRequirement[] = [];
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    requirements.push({ key, operator: "Equals", values: [value] });
  }
  for (const expression of selector.matchExpressions ?? []) {
    // validateLabelSelector has already restricted the operator to these four.
    const operator = expression.operator as "In" | "NotIn" | "Exists" | "DoesNotExist";
    requirements.push({ key: expression.key, operator, values: expression.values ?? [] });
  }
  return requirements;
}

/**
 * metav1.LabelSelector semantics: a null selector matches nothing, an empty one matches
 * everything, and an invalid one matches nothing (Kubernetes refuses to build it).
 */
export function labelSelectorMatches(
  selector: LabelSelectorLike | undefined | null,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  if (selector === undefined || selector === null) return false;
  if (validateLabelSelector(selector).length > 0) return false;
  return requirementsMatch(selectorRequirements(selector), labels);
}

/**
 * The PV binder's reading of `claim.spec.selector`: absent means "no constraint", so a
 * null selector matches every volume; otherwise as labelSelectorMatches.
 */
export function claimSelectorMatches(
  selector: LabelSelectorLike | undefined | null,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  if (selector === undefined || selector === null) return true;
  return labelSelectorMatches(selector, labels);
}
