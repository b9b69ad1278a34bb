// metav1.Time has second precision; send what kube-apiserver sends.
export function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}
