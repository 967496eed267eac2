/**
 * The admin API is not a brute-force target: wrong admin tokens are counted per client address (CF-Connecting-IP,
 * IPv6 by prefix) by a Durable Object like any rule's (exact across isolates and locations), 5 per minute (GCRA,
 * burst 5).
 *
 * Only a presented token is ever compared, and only after one attempt has been charged: the charge is what admits the
 * comparison, so forty guesses sent at once get five comparisons, not "five and whatever raced past a look". The
 * right token gives its charge back, so an operator's own requests never use up the address's attempts. A request
 * without a token (a CORS preflight, a page's cross-site GET, a malformed header) is answered 401 without touching
 * the guard: nobody can lock an operator out by making their browser send tokenless requests. When the guard's object
 * cannot answer, nothing is compared (admin.ts answers 503): a guess is never let through uncounted. The token is
 * for /_sluice only: `withoutAdminToken` strips it from what is forwarded.
 */

import { logEvent } from "../../isolate/metrics.ts";
import { limiterStub } from "../../object/names.ts";
import { messageOf } from "../../protocol/object_call.ts";
import type { CallResult, LimiterRule } from "../../protocol/store.ts";
import { problemResponse } from "../../request/headers.ts";
import { clientAddressOf } from "../../request/identity.ts";
import { rateOf } from "../../rules/duration.ts";
import type { AlgorithmParams } from "../../rules/types.ts";
import { constantTimeEqual, keyHashOf } from "../hash.ts";
import type { Env, Settings } from "../settings.ts";

/** Wrong admin tokens compared per client address per minute. */
export const ADMIN_FAILURES_PER_MIN = 5;

/** Not a valid rule id (`/`), so it never shares an object with a rule. */
const RULE: LimiterRule = {
  id: "_sluice/admin-auth",
  params: {
    algorithm: "gcra",
    rate: rateOf(ADMIN_FAILURES_PER_MIN, 60_000),
    burst: ADMIN_FAILURES_PER_MIN,
  } as AlgorithmParams,
};

/** The answer to "may this address have one token compared now". */
export type Attempt =
  | { readonly kind: "charged"; readonly atMs: number }
  | { readonly kind: "locked"; readonly retryAfterS: number }
  | { readonly kind: "unavailable" };

export interface AdminGuard {
  /** Charge one attempt for the address, before any comparison. */
  charge(): Promise<Attempt>;
  /** Give a charged attempt back (the token was right). A failure is logged: the attempt stays spent. */
  giveBack(atMs: number): Promise<void>;
}

/** The guard for `address` (the address key, identity.ts; `""` for a request without one). */
export async function adminGuard(address: string, env: Env, settings: Settings): Promise<AdminGuard> {
  const keyHash = await keyHashOf(settings.keyHashSecret, `admin:${address}`);
  const stub = () => limiterStub(env.LIMITER, RULE.id, keyHash);
  return {
    async charge() {
      try {
        const call = (await stub().check({ rule: RULE, id: crypto.randomUUID(), costs: [1] })) as CallResult;
        const result = call.results[0];
        if (result === undefined || !result.ok) throw new Error("the guard's object answered no decision");
        if (result.decision.allowed) return { kind: "charged", atMs: result.atMs };
        return { kind: "locked", retryAfterS: Math.max(1, Math.ceil((result.decision.retryAfterMs ?? 1000) / 1000)) };
      } catch (error) {
        logEvent("error", { event: "admin_guard_failed", key: keyHash, error: messageOf(error) });
        return { kind: "unavailable" };
      }
    },
    async giveBack(atMs) {
      try {
        await stub().refund({ rule: RULE, cost: 1, admittedAtMs: atMs });
      } catch (error) {
        logEvent("error", { event: "admin_guard_refund_failed", key: keyHash, error: messageOf(error) });
      }
    },
  };
}

/**
 * Deletes every header of `headers` that carries `token` (as is, or inside a Basic credential); returns how many.
 * The admin token is for /_sluice only: an upstream never receives it.
 */
export function withoutAdminToken(headers: Headers, token: string): number {
  const carrying: string[] = [];
  for (const [name, value] of headers) {
    if (value.includes(token) || basicCarries(value, token)) carrying.push(name);
  }
  for (const name of carrying) headers.delete(name);
  return carrying.length;
}

function basicCarries(value: string, token: string): boolean {
  const m = /^basic[ \t]+([A-Za-z0-9+/]+)={0,2}$/i.exec(value.trim());
  // A length of 4n+1 is no base64 (atob would throw): it cannot carry the token in that form.
  if (m === null || m[1]!.length % 4 === 1) return false;
  return atob(m[1]!).includes(token);
}

function problem(status: number, title: string, detail: string, headers: [string, string][] = []): Response {
  return problemResponse(status, { type: "about:blank", title, status, detail }, headers);
}

/**
 * `null` when the request carries the admin token; else its answer: 401 without a token (nothing counted), 429 for an
 * address out of attempts, 503 when the guard cannot count (nothing compared), 401 for a wrong token (counted).
 */
export async function checkToken(request: Request, url: URL, env: Env, settings: Settings): Promise<Response | null> {
  const unauthorized = () =>
    problem(401, "Unauthorized", "Authorization: Bearer <ADMIN_TOKEN> is required.", [
      ["WWW-Authenticate", 'Bearer realm="sluice-admin"'],
    ]);
  const presented = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(request.headers.get("authorization")?.trim() ?? "")?.[1];
  if (presented === undefined) return unauthorized();
  const address = clientAddressOf(request.headers, settings.ipv6PrefixBits);
  if (address !== null && typeof address === "object") return problem(400, "Bad Request", address.error);
  const guard = await adminGuard(address ?? "", env, settings);
  const attempt = await guard.charge();
  if (attempt.kind === "unavailable") {
    return problem(
      503,
      "Service Unavailable",
      "The admin token guard cannot count attempts now; nothing was compared.",
      [["Retry-After", "1"]],
    );
  }
  if (attempt.kind === "locked") {
    return problem(429, "Too Many Requests", "Too many wrong admin tokens from this address.", [
      ["Retry-After", String(attempt.retryAfterS)],
    ]);
  }
  if (await constantTimeEqual(presented, settings.adminToken!)) {
    await guard.giveBack(attempt.atMs);
    return null;
  }
  logEvent("warn", { event: "admin_unauthorized", path: url.pathname.slice(0, 64) });
  return unauthorized();
}
