/**
 * The admin API is not a brute-force target: failed token checks are counted per client address (CF-Connecting-IP,
 * IPv6 by prefix) by a Durable Object like any rule's (exact across isolates and locations), 5 per minute (GCRA,
 * burst 5). An address that has used them up gets 429 with Retry-After before its token is even compared, so
 * guessing goes no faster than that, and a right guess is not revealed while locked out.
 */

import { logEvent } from "../../isolate/metrics.ts";
import { limiterStub } from "../../object/names.ts";
import { messageOf } from "../../protocol/object_call.ts";
import type { LimiterRule, PeekResult } from "../../protocol/store.ts";
import { clientIpKey } from "../../request/identity.ts";
import { rateOf } from "../../rules/duration.ts";
import type { AlgorithmParams } from "../../rules/types.ts";
import { keyHashOf } from "../hash.ts";
import type { Env, Settings } from "../settings.ts";

/** Failed admin token checks allowed per client address per minute. */
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

export interface AdminGuard {
  /** Seconds until this address may try again, or `null` when it may now. */
  lockedForS(): Promise<number | null>;
  /** Count one failed check; seconds until the next try is allowed if that was the last allowed, else `null`. */
  failed(): Promise<number | null>;
}

export async function adminGuard(request: Request, env: Env, settings: Settings): Promise<AdminGuard> {
  const address = clientIpKey(request.headers.get("cf-connecting-ip"), settings.ipv6PrefixBits) ?? "";
  const keyHash = await keyHashOf(settings.keyHashSecret, `admin:${address}`);
  const stub = () => limiterStub(env.LIMITER, RULE.id, keyHash);
  // The guard must not lock operators out when the limiter itself fails: such a failure is logged and not counted.
  const guarded = async (what: () => Promise<number | null>) => {
    try {
      return await what();
    } catch (error) {
      logEvent("error", { event: "admin_guard_failed", key: keyHash, error: messageOf(error) });
      return null;
    }
  };
  const seconds = (ms: number | null) => (ms === null ? null : Math.max(1, Math.ceil(ms / 1000)));
  return {
    lockedForS: () => guarded(async () => seconds(((await stub().peek({ rule: RULE })) as PeekResult).retryAfterMs)),
    failed: () =>
      guarded(async () => {
        await stub().check({ rule: RULE, id: crypto.randomUUID(), costs: [1] });
        return seconds(((await stub().peek({ rule: RULE })) as PeekResult).retryAfterMs);
      }),
  };
}
