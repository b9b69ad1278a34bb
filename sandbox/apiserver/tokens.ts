// Bearer tokens the sandbox knows, and the TokenReview API that answers for
// them (POST /apis/authentication.k8s.io/v1/tokenreviews), so functions with
// AUTH_MODE=tokenreview can be tested against the sandbox. Tokens are
// registered through a sandbox-only hook:
//
//   PUT    /_sandbox/tokens  {"<token>": {"username": "...", "uid"?: "...", "groups"?: [...], "audiences"?: [...]}}
//   GET    /_sandbox/tokens  the usernames (never the tokens)
//   DELETE /_sandbox/tokens  forget all
//
// PUT replaces the whole set. A token without `audiences` is valid for the
// API server's own audience, like a legacy service account token. The
// sandbox does not authenticate its own API requests; a registered token on
// a write only decides the userInfo that admission webhooks see.

import { isRecord } from "../../shared/is-record.ts";
import { ApiError, badRequest } from "./status.ts";

export const API_SERVER_AUDIENCE = "https://kubernetes.default.svc.cluster.local";

export interface SandboxUser {
  username: string;
  uid?: string;
  groups: string[];
  audiences: string[];
}

function stringList(value: unknown, what: string): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || !value.every((v) => typeof v === "string"))
    throw badRequest(`tokens: ${what} must be a list of strings`);
  return value;
}

export class TokenRegistry {
  private tokens = new Map<string, SandboxUser>();

  /** Replaces the set; 400 on a malformed entry, leaving the old set in place. */
  set(body: unknown): void {
    if (!isRecord(body)) throw badRequest('tokens: expected {"<token>": {"username": "..."}}');
    const next = new Map<string, SandboxUser>();
    for (const [token, entry] of Object.entries(body)) {
      if (token === "") throw badRequest("tokens: a token must not be empty");
      if (!isRecord(entry) || typeof entry.username !== "string" || entry.username === "")
        throw badRequest(`tokens: the entry of a token needs a username`);
      next.set(token, {
        username: entry.username,
        ...(typeof entry.uid === "string" && entry.uid !== "" ? { uid: entry.uid } : {}),
        groups: [...(stringList(entry.groups, "groups") ?? []), "system:authenticated"],
        audiences: stringList(entry.audiences, "audiences") ?? [API_SERVER_AUDIENCE],
      });
    }
    this.tokens = next;
  }

  clear(): void {
    this.tokens.clear();
  }

  usernames(): string[] {
    return [...this.tokens.values()].map((u) => u.username);
  }

  lookup(token: string): SandboxUser | undefined {
    return this.tokens.get(token);
  }

  /** The user of an `Authorization: Bearer` header, if the token is registered. */
  userOfHeader(authorization: string | undefined): SandboxUser | undefined {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
    return match?.[1] === undefined ? undefined : this.lookup(match[1]);
  }

  /** A TokenReview create: the review as kube-apiserver answers it (201), or 400 for a malformed one. */
  review(body: unknown): Record<string, unknown> {
    if (!isRecord(body)) throw badRequest("the body of the request must be a JSON object");
    if (body.apiVersion !== undefined && body.apiVersion !== "authentication.k8s.io/v1")
      throw badRequest(
        `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (authentication.k8s.io/v1)`,
      );
    if (body.kind !== undefined && body.kind !== "TokenReview")
      throw badRequest(
        `the kind in the data (${String(body.kind)}) does not match the expected kind (TokenReview)`,
      );
    const spec = isRecord(body.spec) ? body.spec : {};
    if (typeof spec.token !== "string" || spec.token === "")
      throw new ApiError(400, "BadRequest", "token is required for TokenReview in authentication");
    const wanted = stringList(spec.audiences, "spec.audiences");
    const user = this.lookup(spec.token);
    const audiences =
      user === undefined
        ? []
        : wanted === undefined
          ? user.audiences
          : wanted.filter((a) => user.audiences.includes(a));
    const status =
      user === undefined
        ? { user: {}, error: "invalid bearer token" }
        : audiences.length === 0
          ? {
              user: {},
              error: `token audiences ${JSON.stringify(user.audiences)} is invalid for the target audiences ${JSON.stringify(wanted)}`,
            }
          : {
              authenticated: true,
              user: { username: user.username, ...(user.uid ? { uid: user.uid } : {}), groups: user.groups },
              audiences,
            };
    return {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenReview",
      metadata: { creationTimestamp: null },
      spec: { token: spec.token, ...(wanted ? { audiences: wanted } : {}) },
      status,
    };
  }
}
