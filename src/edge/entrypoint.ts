/**
 * The service binding: another Worker binds to Sluice with
 *
 *   [[services]]
 *   binding = "SLUICE"
 *   service = "sluice"
 *   entrypoint = "RateLimiter"
 *   props = { rule = "api-per-key" }   # optional: the rule `limit` uses when a call names none
 *
 * and calls `env.SLUICE.limit({ key })` (the native Rate Limiting binding's shape) or `env.SLUICE.check(request)`
 * (every matching rule, as the gateway applies them), and `env.SLUICE.release(slot)` for a concurrency rule's slot. The calls themselves are binding.ts; the types the caller
 * imports are src/client/types.ts.
 */
import { WorkerEntrypoint } from "cloudflare:workers";
import type { CheckResult, LimitResult, ReleaseResult, RenewResult, SluiceBinding } from "../client/types.ts";
import { checkRequest, limitKey, releaseSlotsCall, renewSlotsCall } from "./binding.ts";
import { DEPLOYED_DENIES, DEPLOYED_RULES, ISOLATE } from "./deployed.ts";
import type { Env } from "./settings.ts";

export class RateLimiter extends WorkerEntrypoint<Env, unknown> implements SluiceBinding {
  limit(options: unknown): Promise<LimitResult> {
    return limitKey(options, this.ctx.props, this.#bindingContext());
  }

  check(request: unknown): Promise<CheckResult> {
    return checkRequest(request, this.#bindingContext());
  }

  release(slots: unknown): Promise<ReleaseResult> {
    return releaseSlotsCall(slots, this.#bindingContext());
  }

  renew(slots: unknown): Promise<RenewResult> {
    return renewSlotsCall(slots, this.#bindingContext());
  }

  // A private name (#) is not callable over RPC: the env and the isolate never leave this Worker.
  #bindingContext() {
    return { env: this.env, ctx: this.ctx, rules: DEPLOYED_RULES, denies: DEPLOYED_DENIES, isolate: ISOLATE };
  }
}
