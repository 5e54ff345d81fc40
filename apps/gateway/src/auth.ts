import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Context, MiddlewareHandler } from "hono";
import { z } from "zod";
import type { GatewayEnv } from "./errors.js";
import { compilePattern } from "./router.js";

/**
 * Bearer tokens for every door. Levels are cumulative, read < write < admin; `metrics` lets a
 * scraper read /metrics and nothing else (every other token may read it too).
 */
export const ACCESS_LEVELS = ["metrics", "read", "write", "admin"] as const;
export type Access = (typeof ACCESS_LEVELS)[number];

const RANK: Record<Access, number> = { metrics: 0, read: 1, write: 2, admin: 3 };

export const TokenSchema = z.strictObject({
  /** Shown in logs and 403 messages; never the token itself. */
  name: z.string().min(1).max(100),
  /** The value, `env:NAME` (read from the environment) or `file:PATH` (the file's first line). */
  token: z.string().min(1),
  access: z.enum(ACCESS_LEVELS),
  /** The doors it may use (native, qless, workerqueue, cloudq, glidemq); all when left out. */
  doors: z
    .array(z.enum(["native", "qless", "workerqueue", "cloudq", "glidemq"]))
    .min(1)
    .optional(),
  /** Queue-name patterns (`*` as in routes) it may touch; all when left out. */
  queues: z.array(z.string().min(1)).min(1).optional(),
  /** Requests per second this token may make in each gateway process (a token bucket `burst` deep); unlimited when left out. */
  rateLimit: z.strictObject({ perSecond: z.number().positive().max(1_000_000), burst: z.number().int().positive().optional() }).optional(),
});
export const AuthSchema = z.strictObject({ tokens: z.array(TokenSchema).default([]) });
export type AuthConfig = z.output<typeof AuthSchema>;
type TokenConfig = z.output<typeof TokenSchema>;

/** The OpenAPI security scheme of the tokens; each route lists the level it needs as its role. */
export const BEARER_SCHEME = "bearer";

/** The `security` of a route that needs `access`, for /openapi.json (OpenAPI 3.1 roles). */
export function securityOf(access: Access): Array<Record<string, string[]>> {
  return [{ [BEARER_SCHEME]: [access] }];
}

/** Who a request is, once its token matched. */
export interface Principal {
  name: string;
  access: Access;
  doors: readonly string[] | null;
  queues: readonly RegExp[] | null;
  bucket: TokenBucket | null;
}

/** `perSecond` requests a second on average, up to `burst` at once. */
export class TokenBucket {
  #tokens: number;
  #at = performance.now();

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
  ) {
    this.#tokens = burst;
  }

  /** Takes one request's token; otherwise the seconds until one is there. */
  take(): { ok: true } | { ok: false; retryAfterSeconds: number } {
    const now = performance.now();
    this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#at) / 1000) * this.perSecond);
    this.#at = now;
    if (this.#tokens >= 1) {
      this.#tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - this.#tokens) / this.perSecond)) };
  }
}

interface KnownToken extends Principal {
  digest: Buffer;
}

const digest = (value: string) => createHash("sha256").update(value).digest();

/** A token's value as the config names it; the config file itself never needs to hold it. */
function resolveToken(token: TokenConfig, env: Record<string, string | undefined>): string {
  if (token.token.startsWith("env:")) {
    const value = env[token.token.slice(4)];
    if (!value) throw new Error(`auth token "${token.name}": the environment variable ${token.token.slice(4)} is not set`);
    return value;
  }
  if (token.token.startsWith("file:")) {
    const path = token.token.slice(5);
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (error) {
      throw new Error(`auth token "${token.name}": cannot read ${path}: ${(error as Error).message}`);
    }
    const value = text.split(/\r?\n/)[0]?.trim() ?? "";
    if (!value) throw new Error(`auth token "${token.name}": ${path} is empty`);
    return value;
  }
  return token.token;
}

export class TokenAuth {
  readonly #tokens: KnownToken[];

  constructor(config: AuthConfig, env: Record<string, string | undefined>) {
    this.#tokens = config.tokens.map((token) => ({
      name: token.name,
      access: token.access,
      doors: token.doors ?? null,
      queues: token.queues?.map(compilePattern) ?? null,
      bucket: token.rateLimit
        ? new TokenBucket(token.rateLimit.perSecond, token.rateLimit.burst ?? Math.ceil(token.rateLimit.perSecond))
        : null,
      digest: digest(resolveToken(token, env)),
    }));
  }

  get enabled(): boolean {
    return this.#tokens.length > 0;
  }

  /** The token's principal, compared in constant time against every known token. */
  identify(presented: string): Principal | null {
    const given = digest(presented);
    let found: Principal | null = null;
    for (const token of this.#tokens) if (timingSafeEqual(given, token.digest) && !found) found = token;
    return found;
  }

  /** Reads `Authorization: Bearer <token>` (or a Basic password, for Cloudq clients) into the request's principal. */
  middleware(): MiddlewareHandler<GatewayEnv> {
    return async (c, next) => {
      c.set("authEnabled", this.enabled);
      c.set("principal", this.enabled ? this.identify(presentedToken(c) ?? "") : null);
      await next();
    };
  }
}

function presentedToken(c: Context<GatewayEnv>): string | null {
  const header = c.req.header("authorization") ?? "";
  const bearer = /^Bearer\s+(\S+)$/i.exec(header);
  if (bearer) return bearer[1]!;
  // Cloudq clients only speak basic auth: the token goes in the password.
  const basic = /^Basic\s+(\S+)$/i.exec(header);
  if (!basic) return null;
  const decoded = Buffer.from(basic[1]!, "base64").toString("utf8");
  return decoded.slice(decoded.indexOf(":") + 1) || null;
}

/** A request without a known token (401), without the access it needs (403), or over its token's rate (429). */
export class AuthError extends Error {
  constructor(
    readonly status: 401 | 403 | 429,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = "AuthError";
  }
}

/**
 * What a route needs: the access level, on this door, and (once the handler knows it) the queue.
 * Open when no token is configured; otherwise 401 without a known token, 403 naming what is missing.
 */
export function requireAccess(c: Context<GatewayEnv>, door: string, access: Access, queue?: string): void {
  if (!c.get("authEnabled")) return;
  const principal = c.get("principal");
  if (!principal) throw new AuthError(401, "a known bearer token is required (Authorization: Bearer <token>)");
  // Counted once per request, however many checks its route makes.
  if (principal.bucket && !c.get("rateCounted")) {
    c.set("rateCounted", true);
    const taken = principal.bucket.take();
    if (!taken.ok)
      throw new AuthError(
        429,
        `token "${principal.name}" is over its rate limit; retry after ${taken.retryAfterSeconds} s`,
        taken.retryAfterSeconds,
      );
  }
  checkAccess(principal, door, access, queue);
}

/** What a known token may do: its level, its doors and its queue patterns (403 naming what is missing). */
export function checkAccess(principal: Principal, door: string, access: Access, queue?: string): void {
  if (RANK[principal.access] < RANK[access]) {
    throw new AuthError(403, `token "${principal.name}" has ${principal.access} access; this needs ${access}`);
  }
  if (access !== "metrics" && principal.doors && !principal.doors.includes(door)) {
    throw new AuthError(403, `token "${principal.name}" may not use the ${door} door`);
  }
  if (queue !== undefined && principal.queues && !principal.queues.some((pattern) => pattern.test(queue))) {
    throw new AuthError(403, `token "${principal.name}" may not use queue "${queue}"`);
  }
}

/** Whether the request's token may see `queue` (always, when no token is configured). */
export function allowsQueue(c: Context<GatewayEnv>, queue: string): boolean {
  const queues = c.get("authEnabled") ? c.get("principal")?.queues : null;
  return !queues || queues.some((pattern) => pattern.test(queue));
}

/** Route middleware: the level a route needs, checked against its path's `queue` when it has one. */
export function needs(door: string, access: Access): MiddlewareHandler<GatewayEnv> {
  return async (c, next) => {
    // Without tokens there is nothing to check, and the path's queue need not be decoded.
    if (c.get("authEnabled")) requireAccess(c, door, access, c.req.param("queue"));
    await next();
  };
}
