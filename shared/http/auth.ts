// Who may send events to a function. Event endpoints change cluster state
// (bind, provision, attach), so outside a trusted mesh they need a caller
// identity. Three modes, chosen by AUTH_MODE:
//
//   none         (default) anyone who can reach the port; for local use, or
//                when the platform authenticates (Knative + mesh, IAM).
//   token        `Authorization: Bearer <AUTH_TOKEN>`: one shared secret, e.g.
//                for the bundled forwarder. Compared in constant time.
//   tokenreview  the bearer token is a Kubernetes token (a projected service
//                account token of the forwarder / ApiServerSource adapter),
//                checked with an authentication.k8s.io/v1 TokenReview, the way
//                kubelet and aggregated API servers authenticate callers.
//                Results are cached briefly so an event burst costs one review.
//                AUTH_ALLOWED_USERS then limits which users may call.
//
// Answers: 401 + `WWW-Authenticate: Bearer` when the token is missing or not
// valid, 403 when valid but not allowed, 503 when the API server cannot be
// asked right now (senders retry 503). Probes stay open: the kubelet and
// Prometheus do not carry tokens.

import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Env } from "../config.ts";
import { loadKubeConfig } from "../kube/client.ts";
import { KubeJsonClient } from "../kube/json-client.ts";
import { type ResourceDescriptor, tokenReviews } from "../kube/resources.ts";
import type { KubeObject } from "../kube/types.ts";

type AuthMode = "none" | "token" | "tokenreview";

interface AuthUser {
  username: string;
  uid?: string;
  groups: string[];
}

interface Authenticator {
  /** The token's user, undefined for a token that is not valid; throws when it cannot tell (API down). */
  authenticate(token: string): Promise<AuthUser | undefined>;
}

export interface AuthPolicy {
  mode: Exclude<AuthMode, "none">;
  authenticator: Authenticator;
  /** Usernames allowed to call; undefined lets every authenticated user in. */
  allowedUsers?: ReadonlySet<string>;
  /** Releases the API client of a tokenreview policy. */
  close?(): Promise<void>;
}

type AuthOutcome =
  | { ok: true; user: AuthUser }
  | { ok: false; status: 401 | 403; error: string; challenge?: string };

class AuthConfigError extends Error {
  override name = "AuthConfigError";
}

/** The user name a `token`-mode caller gets in logs. */
const STATIC_TOKEN_USER = "static-token";
const DEFAULT_AUTH_CACHE_TTL_MS = 10_000;
const DEFAULT_MAX_CACHE_ENTRIES = 1000;

function digest(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}

/**
 * Compares the presented token with the expected one in constant time.
 * Comparing SHA-256 digests gives equal-length inputs to timingSafeEqual, so
 * not even the expected token's length leaks.
 */
export function staticTokenAuthenticator(
  expected: string,
  username: string = STATIC_TOKEN_USER,
): Authenticator {
  if (expected === "") throw new AuthConfigError("the expected token must not be empty");
  const want = digest(expected);
  return {
    authenticate: async (token) =>
      timingSafeEqual(digest(token), want) ? { username, groups: [] } : undefined,
  };
}

/** What a TokenReview needs of a client; KubeJsonClient fits. */
interface TokenReviewClient {
  create<T extends KubeObject>(r: ResourceDescriptor, obj: T): Promise<T>;
}

interface TokenReviewOptions {
  client: TokenReviewClient;
  /** spec.audiences; the answer must name one of them. Default: the API server's own audience. */
  audiences?: readonly string[];
  /** How long an answer (valid or not) is reused. Default 10 s; 0 disables the cache. */
  cacheTtlMs?: number;
  maxCacheEntries?: number;
  now?: () => number;
}

interface TokenReviewStatus {
  authenticated?: boolean;
  user?: { username?: string; uid?: string; groups?: string[] };
  audiences?: string[];
  error?: string;
}

function userOf(
  status: TokenReviewStatus | undefined,
  audiences: readonly string[] | undefined,
): AuthUser | undefined {
  if (
    status?.authenticated !== true ||
    typeof status.user?.username !== "string" ||
    status.user.username === ""
  )
    return undefined;
  // As kube's webhook token authenticator: with audiences asked for, an answer
  // for none of them is not an authentication for us.
  if (audiences && audiences.length > 0 && !(status.audiences ?? []).some((a) => audiences.includes(a)))
    return undefined;
  return {
    username: status.user.username,
    ...(typeof status.user.uid === "string" && status.user.uid !== "" ? { uid: status.user.uid } : {}),
    groups: Array.isArray(status.user.groups) ? status.user.groups.filter((g) => typeof g === "string") : [],
  };
}

export function tokenReviewAuthenticator(options: TokenReviewOptions): Authenticator {
  const ttl = options.cacheTtlMs ?? DEFAULT_AUTH_CACHE_TTL_MS;
  const maxEntries = options.maxCacheEntries ?? DEFAULT_MAX_CACHE_ENTRIES;
  const now = options.now ?? Date.now;
  // Keyed by the token's digest, so the cache never holds a usable token.
  const cache = new Map<string, { user: AuthUser | undefined; expires: number }>();
  const inFlight = new Map<string, Promise<AuthUser | undefined>>();

  const review = async (token: string): Promise<AuthUser | undefined> => {
    const answer = await options.client.create<KubeObject>(tokenReviews, {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenReview",
      metadata: { name: "" },
      spec: { token, ...(options.audiences?.length ? { audiences: [...options.audiences] } : {}) },
    });
    return userOf(answer.status as TokenReviewStatus | undefined, options.audiences);
  };

  return {
    authenticate: async (token) => {
      const key = digest(token).toString("hex");
      const hit = cache.get(key);
      if (hit !== undefined && hit.expires > now()) return hit.user;
      if (hit !== undefined) cache.delete(key);
      // One review per token at a time: a burst of events shares it.
      let pending = inFlight.get(key);
      if (pending === undefined) {
        pending = review(token).finally(() => inFlight.delete(key));
        inFlight.set(key, pending);
      }
      const user = await pending;
      if (ttl > 0) {
        // Errors are never cached (they throw above); answers are, briefly.
        if (cache.size >= maxEntries) {
          const oldest = cache.keys().next().value;
          if (oldest !== undefined) cache.delete(oldest);
        }
        cache.set(key, { user, expires: now() + ttl });
      }
      return user;
    },
  };
}

/**
 * The token of an `Authorization: Bearer <token>` header; undefined when there
 * is no header, null when there is one of another shape.
 */
export function bearerToken(header: string | undefined): string | undefined | null {
  if (header === undefined || header === "") return undefined;
  const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header);
  return match?.[1] ?? null;
}

/** Decides one request from its Authorization header. Throws when the authenticator cannot answer. */
export async function authorize(
  policy: AuthPolicy,
  authorization: string | undefined,
  realm: string,
): Promise<AuthOutcome> {
  const challenge = `Bearer realm="${realm.replace(/["\\]/g, "")}"`;
  const token = bearerToken(authorization);
  if (token === undefined)
    return { ok: false, status: 401, error: "unauthorized: a bearer token is required", challenge };
  const user = token === null ? undefined : await policy.authenticator.authenticate(token);
  if (user === undefined) {
    return {
      ok: false,
      status: 401,
      error: "unauthorized: the bearer token is not valid",
      challenge: `${challenge}, error="invalid_token"`,
    };
  }
  if (policy.allowedUsers !== undefined && !policy.allowedUsers.has(user.username)) {
    return { ok: false, status: 403, error: `forbidden: user "${user.username}" may not call this function` };
  }
  return { ok: true, user };
}

function setting(env: Env, name: string): string | undefined {
  const raw = env[name]?.trim();
  return raw === undefined || raw === "" ? undefined : raw;
}

function list(raw: string | undefined): string[] {
  return (raw ?? "")
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

interface AuthFromEnvOptions {
  /** The API client for tokenreview; defaults to one from KUBECONFIG or the service account. */
  kube?: () => TokenReviewClient & { close?(): Promise<void> };
}

function modeFromEnv(env: Env): AuthMode {
  const mode = (setting(env, "AUTH_MODE") ?? "none").toLowerCase();
  if (mode !== "none" && mode !== "token" && mode !== "tokenreview")
    throw new AuthConfigError(`AUTH_MODE must be none, token or tokenreview, got ${JSON.stringify(mode)}`);
  return mode;
}

function readStaticToken(env: Env): string {
  const inline = setting(env, "AUTH_TOKEN");
  const file = setting(env, "AUTH_TOKEN_FILE");
  if (inline !== undefined && file !== undefined)
    throw new AuthConfigError("set AUTH_TOKEN or AUTH_TOKEN_FILE, not both");
  let token = inline;
  if (file !== undefined) {
    try {
      token = readFileSync(file, "utf8").trim();
    } catch (err) {
      throw new AuthConfigError(`cannot read AUTH_TOKEN_FILE ${file}: ${(err as Error).message}`);
    }
  }
  if (token === undefined || token === "")
    throw new AuthConfigError("AUTH_MODE=token needs AUTH_TOKEN (or AUTH_TOKEN_FILE) with a non-empty token");
  return token;
}

/** The bearer token AUTH_MODE=token expects (for callers inside the platform, like a schedule); undefined in other modes. */
export function staticTokenFromEnv(env: Env = process.env): string | undefined {
  return modeFromEnv(env) === "token" ? readStaticToken(env) : undefined;
}

/**
 * The policy AUTH_MODE and friends describe, undefined for AUTH_MODE=none (or
 * unset). Mistakes throw at start: a function meant to be protected must not
 * come up open because of a typo.
 */
export function authPolicyFromEnv(
  env: Env = process.env,
  options: AuthFromEnvOptions = {},
): AuthPolicy | undefined {
  const mode = modeFromEnv(env);
  const allowed = list(setting(env, "AUTH_ALLOWED_USERS"));
  if (allowed.length > 0 && mode !== "tokenreview")
    throw new AuthConfigError("AUTH_ALLOWED_USERS only applies to AUTH_MODE=tokenreview");
  if (mode === "none") return undefined;
  if (mode === "token") return { mode, authenticator: staticTokenAuthenticator(readStaticToken(env)) };

  const ttlRaw = setting(env, "AUTH_CACHE_TTL_SECONDS");
  if (ttlRaw !== undefined && (!/^\d+$/.test(ttlRaw) || Number(ttlRaw) > 3600))
    throw new AuthConfigError(`AUTH_CACHE_TTL_SECONDS must be 0..3600, got ${JSON.stringify(ttlRaw)}`);
  const client = options.kube?.() ?? new KubeJsonClient(loadKubeConfig(env));
  const audiences = list(setting(env, "AUTH_TOKEN_AUDIENCES"));
  return {
    mode,
    authenticator: tokenReviewAuthenticator({
      client,
      ...(audiences.length > 0 ? { audiences } : {}),
      ...(ttlRaw !== undefined ? { cacheTtlMs: Number(ttlRaw) * 1000 } : {}),
    }),
    ...(allowed.length > 0 ? { allowedUsers: new Set(allowed) } : {}),
    close: async () => {
      await client.close?.();
    },
  };
}
