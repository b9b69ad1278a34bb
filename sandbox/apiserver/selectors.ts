// The string selector syntax of list/watch query parameters (`labelSelector=`,
// `fieldSelector=`) and the fields each resource exposes to field selectors.

import {
  type LabelOperator,
  type LabelRequirement,
  requirementsMatch,
  validateLabelKey,
  validateLabelValue,
} from "../../shared/kube/label-selector.ts";

export type { LabelRequirement } from "../../shared/kube/label-selector.ts";

export class SelectorParseError extends Error {
  readonly selector: string;

  constructor(message: string, selector: string) {
    super(message);
    this.name = "SelectorParseError";
    this.selector = selector;
  }
}

// ---------------------------------------------------------------------------
// Label selectors

type TokenKind =
  | "identifier"
  | "in"
  | "notin"
  | "="
  | "=="
  | "!="
  | "!"
  | "("
  | ")"
  | ","
  | "<"
  | ">"
  | "end";

interface Token {
  readonly kind: TokenKind;
  readonly text: string;
  readonly position: number;
}

const SYMBOLS: readonly TokenKind[] = ["==", "!=", "=", "!", "(", ")", ",", "<", ">"];

function isSpace(char: string): boolean {
  return char === " " || char === "\t" || char === "\r" || char === "\n";
}

function isIdentifierChar(char: string): boolean {
  return !isSpace(char) && !"=!(),<>".includes(char);
}

function symbolAt(source: string, position: number): Token | undefined {
  // Two-character symbols come first in SYMBOLS so "==" is not read as two "=".
  const kind = SYMBOLS.find((symbol) => source.startsWith(symbol, position));
  return kind === undefined ? undefined : { kind, text: kind, position };
}

function identifierAt(source: string, position: number): Token {
  let end = position;
  while (end < source.length && isIdentifierChar(source.charAt(end))) end++;
  const text = source.slice(position, end);
  const kind: TokenKind = text === "in" || text === "notin" ? text : "identifier";
  return { kind, text, position };
}

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let position = 0;
  while (position < source.length) {
    if (isSpace(source.charAt(position))) {
      position++;
      continue;
    }
    const token = symbolAt(source, position) ?? identifierAt(source, position);
    tokens.push(token);
    position += token.text.length;
  }
  tokens.push({ kind: "end", text: "", position: source.length });
  return tokens;
}

function describe(token: Token): string {
  return token.kind === "end" ? "end of string" : `'${token.text}' at position ${token.position}`;
}

/** Recursive-descent parser over the token list; one instance per selector string. */
class LabelSelectorParser {
  readonly source: string;
  readonly tokens: readonly Token[];
  index = 0;

  constructor(source: string) {
    this.source = source;
    this.tokens = tokenize(source);
  }

  peek(): Token {
    return this.tokens[this.index] ?? this.tokens[this.tokens.length - 1]!;
  }

  next(): Token {
    const token = this.peek();
    if (token.kind !== "end") this.index++;
    return token;
  }

  fail(message: string): never {
    throw new SelectorParseError(`unable to parse label selector "${this.source}": ${message}`, this.source);
  }

  parse(): LabelRequirement[] {
    const requirements: LabelRequirement[] = [];
    if (this.peek().kind === "end") return requirements;
    for (;;) {
      requirements.push(this.requirement());
      const separator = this.next();
      if (separator.kind === "end") return requirements;
      if (separator.kind !== ",") this.fail(`found ${describe(separator)}, expected ',' or end of string`);
    }
  }

  requirement(): LabelRequirement {
    if (this.peek().kind === "!") {
      this.next();
      return this.checked({ key: this.key(), operator: "DoesNotExist", values: [] });
    }
    const key = this.key();
    const operator = this.peek();
    switch (operator.kind) {
      case ",":
      case "end":
        return this.checked({ key, operator: "Exists", values: [] });
      case "=":
      case "==":
        this.next();
        return this.checked({ key, operator: "Equals", values: [this.exactValue()] });
      case "!=":
        this.next();
        return this.checked({ key, operator: "NotEquals", values: [this.exactValue()] });
      case "in":
      case "notin":
        this.next();
        return this.checked({
          key,
          operator: operator.kind === "in" ? "In" : "NotIn",
          values: this.valueSet(),
        });
      case "<":
      case ">":
        this.next();
        return this.checked({ key, operator: comparison(operator.kind), values: [this.exactValue()] });
      default:
        return this.fail(
          `found ${describe(operator)}, expected one of '=', '==', '!=', 'in', 'notin', '<', '>', ',' or end of string`,
        );
    }
  }

  key(): string {
    const token = this.next();
    if (token.kind !== "identifier") this.fail(`found ${describe(token)}, expected a label key`);
    return token.text;
  }

  /** The value after =, == or !=; may be empty ("a=" selects a="" ). */
  exactValue(): string {
    const token = this.peek();
    if (token.kind === "end" || token.kind === ",") return "";
    if (!isValueToken(token)) this.fail(`found ${describe(token)}, expected a label value`);
    this.next();
    return token.text;
  }

  /** "(v1, v2)"; empty entries stand for the empty value, as in Kubernetes. */
  valueSet(): string[] {
    const open = this.next();
    if (open.kind !== "(") this.fail(`found ${describe(open)}, expected '('`);
    const values = new Set<string>();
    let expectValue = true;
    for (;;) {
      const token = this.next();
      if (token.kind === ")") {
        if (expectValue) values.add("");
        return [...values];
      }
      if (token.kind === ",") {
        if (expectValue) values.add("");
        expectValue = true;
      } else if (isValueToken(token) && expectValue) {
        values.add(token.text);
        expectValue = false;
      } else {
        this.fail(`found ${describe(token)}, expected a label value, ',' or ')'`);
      }
    }
  }

  checked(requirement: LabelRequirement): LabelRequirement {
    const keyError = validateLabelKey(requirement.key);
    if (keyError !== undefined) this.fail(keyError);
    for (const value of requirement.values) {
      const valueError = validateLabelValue(value);
      if (valueError !== undefined) this.fail(valueError);
    }
    const isComparison = requirement.operator === "GreaterThan" || requirement.operator === "LessThan";
    if (isComparison && !/^[-+]?\d+$/.test(requirement.values[0] ?? "")) {
      this.fail(`the value of a '<' or '>' requirement on "${requirement.key}" must be an integer`);
    }
    return requirement;
  }
}

function isValueToken(token: Token): boolean {
  // Inside values the keywords are ordinary words: "a=in" and "a in (notin)" are valid.
  return token.kind === "identifier" || token.kind === "in" || token.kind === "notin";
}

function comparison(kind: "<" | ">"): LabelOperator {
  return kind === "<" ? "LessThan" : "GreaterThan";
}

/**
 * Parses `labelSelector` syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`,
 * `!a`, `a>1`, `a<1`, joined by commas. An empty string selects everything.
 */
export function parseLabelSelectorString(selector: string): LabelRequirement[] {
  return new LabelSelectorParser(selector).parse();
}

export function matchesLabelRequirements(
  requirements: readonly LabelRequirement[],
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  return requirementsMatch(requirements, labels);
}

// ---------------------------------------------------------------------------
// Field selectors

export interface FieldRequirement {
  readonly field: string;
  readonly operator: "Equals" | "NotEquals";
  readonly value: string;
}

/** Splits on commas not preceded by a backslash escape. */
function splitTerms(selector: string): string[] {
  const terms: string[] = [];
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    if (selector.charAt(i) === "\\") i++;
    else if (selector.charAt(i) === ",") {
      terms.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(selector.slice(start));
  return terms;
}

const FIELD_OPERATORS = [
  ["!=", "NotEquals"],
  ["==", "Equals"],
  ["=", "Equals"],
] as const;

function splitTerm(term: string): FieldRequirement | undefined {
  for (let i = 0; i < term.length; i++) {
    if (term.charAt(i) === "\\") {
      i++;
      continue;
    }
    for (const [symbol, operator] of FIELD_OPERATORS) {
      if (term.startsWith(symbol, i)) {
        return { field: term.slice(0, i).trim(), operator, value: term.slice(i + symbol.length).trim() };
      }
    }
  }
  return undefined;
}

/** Field values escape `\`, `,` and `=` with a backslash; anything else escaped is an error. */
function unescapeFieldValue(value: string, selector: string): string {
  let out = "";
  for (let i = 0; i < value.length; i++) {
    const char = value.charAt(i);
    if (char === "\\") {
      const escaped = value.charAt(i + 1);
      if (escaped !== "\\" && escaped !== "," && escaped !== "=") {
        throw new SelectorParseError(
          `invalid field selector "${selector}": invalid escape sequence in value "${value}"`,
          selector,
        );
      }
      out += escaped;
      i++;
    } else if (char === "=") {
      throw new SelectorParseError(
        `invalid field selector "${selector}": unescaped '=' in value "${value}"`,
        selector,
      );
    } else {
      out += char;
    }
  }
  return out;
}

/**
 * Parses `fieldSelector` syntax: `f=v`, `f==v`, `f!=v`, joined by commas. Fields outside
 * `supported` are rejected the way kube-apiserver rejects them. Unlike kube-apiserver,
 * whitespace around fields and values is ignored (no selectable value starts or ends with it).
 */
export function parseFieldSelectorString(selector: string, supported: readonly string[]): FieldRequirement[] {
  const requirements: FieldRequirement[] = [];
  for (const rawTerm of splitTerms(selector)) {
    const term = rawTerm.trim();
    if (term === "") continue;
    const parsed = splitTerm(term);
    if (parsed === undefined) {
      throw new SelectorParseError(
        `invalid field selector "${selector}": can't understand "${term}"`,
        selector,
      );
    }
    if (!supported.includes(parsed.field)) {
      throw new SelectorParseError(`field label not supported: ${parsed.field}`, selector);
    }
    requirements.push({ ...parsed, value: unescapeFieldValue(parsed.value, selector) });
  }
  return requirements;
}

/** A missing field reads as "", as in Kubernetes, so `f=` selects objects without f. */
export function matchesFieldRequirements(
  requirements: readonly FieldRequirement[],
  fields: Readonly<Record<string, string>>,
): boolean {
  return requirements.every((requirement) => {
    const value = Object.hasOwn(fields, requirement.field) ? fields[requirement.field] : "";
    return requirement.operator === "Equals" ? value === requirement.value : value !== requirement.value;
  });
}

// ---------------------------------------------------------------------------
// Selectable fields per resource

interface FieldSpec {
  readonly name: string;
  readonly path: readonly string[];
  /** Booleans print as "true"/"false" and an absent one as "false", like Go's zero value. */
  readonly boolean?: boolean;
}

function field(name: string, boolean = false): FieldSpec {
  return { name, path: name.split("."), boolean };
}

const COMMON_FIELDS: readonly FieldSpec[] = [field("metadata.name"), field("metadata.namespace")];

const RESOURCE_FIELDS: ReadonlyMap<string, readonly FieldSpec[]> = new Map([
  [
    "pods",
    [
      field("spec.nodeName"),
      field("spec.restartPolicy"),
      field("spec.schedulerName"),
      field("spec.serviceAccountName"),
      field("spec.hostNetwork", true),
      field("status.phase"),
      field("status.podIP"),
      field("status.nominatedNodeName"),
    ],
  ],
  [
    "events",
    [
      field("involvedObject.kind"),
      field("involvedObject.namespace"),
      field("involvedObject.name"),
      field("involvedObject.uid"),
      field("involvedObject.apiVersion"),
      field("involvedObject.resourceVersion"),
      field("involvedObject.fieldPath"),
      field("reason"),
      field("reportingComponent"),
      { name: "source", path: ["source", "component"] },
      field("type"),
    ],
  ],
  ["nodes", [field("spec.unschedulable", true)]],
  ["secrets", [field("type")]],
  ["namespaces", [field("status.phase")]],
]);

function fieldSpecs(resourcePlural: string): readonly FieldSpec[] {
  return [...COMMON_FIELDS, ...(RESOURCE_FIELDS.get(resourcePlural) ?? [])];
}

export function supportedFieldSelectors(resourcePlural: string): readonly string[] {
  return fieldSpecs(resourcePlural).map((spec) => spec.name);
}

function valueAt(obj: Record<string, unknown>, path: readonly string[]): unknown {
  let current: unknown = obj;
  for (const segment of path) {
    if (typeof current !== "object" || current === null || !Object.hasOwn(current, segment)) return undefined;
    current = (current as Record<string, unknown>)[segment];
  }
  return current;
}

function fieldText(value: unknown, boolean: boolean): string {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return boolean ? "false" : "";
}

/** The field set of one object, as field selectors see it. */
export function fieldsOf(resourcePlural: string, obj: Record<string, unknown>): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const spec of fieldSpecs(resourcePlural)) {
    fields[spec.name] = fieldText(valueAt(obj, spec.path), spec.boolean === true);
  }
  return fields;
}
