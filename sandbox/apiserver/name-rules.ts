// Name formats as k8s.io/apimachinery's util/validation checks them, with its
// messages: a DNS-1123 subdomain (object and class names) and a qualified
// name (label keys, driver names, resource names).

const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const qualifiedNamePart = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

export const dns1123SubdomainMessage =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

const qualifiedNameRule =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/** IsDNS1123Subdomain: one message per failed rule (length, then format). */
export function dns1123SubdomainErrors(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 253) errs.push("must be no more than 253 characters");
  if (!dns1123Subdomain.test(value)) errs.push(dns1123SubdomainMessage);
  return errs;
}

/** IsQualifiedName: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters. */
export function qualifiedNameErrors(value: string): string[] {
  const parts = value.split("/");
  const errs: string[] = [];
  let name: string;
  if (parts.length === 1) {
    name = parts[0] ?? "";
  } else if (parts.length === 2) {
    const prefix = parts[0] ?? "";
    name = parts[1] ?? "";
    if (prefix === "") errs.push("prefix part must be non-empty");
    else errs.push(...dns1123SubdomainErrors(prefix).map((m) => `prefix part ${m}`));
  } else {
    return [
      `a qualified name ${qualifiedNameRule} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ];
  }
  if (name === "") errs.push("name part must be non-empty");
  else if (name.length > 63) errs.push("name part must be no more than 63 characters");
  if (!qualifiedNamePart.test(name)) errs.push(`name part ${qualifiedNameRule}`);
  return errs;
}
