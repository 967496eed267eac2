/** What the request path decides (`Judgement`), what it reports per rule (`RuleReport`), and what its steps share. */
import type { Decision } from "../algorithms/index.ts";
import type { RefundResult } from "../protocol/store.ts";
import type { RuleOutcome } from "../request/compose.ts";
import { policyWindowS, type RuleView } from "../request/headers.ts";
import type { Applicable } from "../request/match.ts";
import type { AskContext, AskResult } from "./ask.ts";
import { jitterSeconds } from "./hash.ts";

/** Everything one request's steps share. */
export interface RequestContext extends AskContext {
  readonly ctx: ExecutionContext;
  /** The request's method, upper-case (`RPC` for the service binding's `limit`); for logs and metrics. */
  readonly method: string;
  /** The caller's plan (`none` for the service binding's `limit`, which names its rule). */
  readonly plan: string;
}

/** One rule's part in a judgement, as the service binding reports it. */
export interface RuleReport {
  readonly rule: string;
  readonly mode: "enforce" | "shadow";
  /** What the rule's answer counted as (metrics.ts). */
  readonly outcome: RuleOutcome;
  /** After any refund; `null` when the rule did not decide (failed, not asked, or costlier than its capacity). */
  readonly remaining: number | null;
  readonly resetAfterMs: number | null;
  /** Set iff the rule denied (or would have, for a shadow rule). */
  readonly retryAfterMs: number | null;
}

/** Why a request was not admitted. */
export type RefusalReason =
  | "forbidden"
  | "bad_request"
  | "unauthorized"
  | "cost_exceeds_capacity"
  | "denied"
  | "fail_closed";

/** What the request path decided, before any origin is asked. */
export type Judgement =
  | {
      readonly kind: "refused";
      readonly reason: RefusalReason;
      readonly status: number;
      /** The RFC 9457 body the gateway answers with. */
      readonly problem: Readonly<Record<string, unknown>>;
      readonly headers: ReadonlyArray<readonly [string, string]>;
      readonly rules: readonly RuleReport[];
    }
  | {
      readonly kind: "admitted";
      /** RateLimit fields (and the lease header) for the response. */
      readonly headers: ReadonlyArray<readonly [string, string]>;
      /** How long the request was held for shaping before this answer (leaky_queue), ms. */
      readonly delayedMs: number;
      readonly rules: readonly RuleReport[];
      /** Every rule's answer, for the echo origin. */
      readonly outcomes: readonly AskResult[];
    };

/** One rule's report; `decision` is `null` when the rule did not decide, `after` its refund's figures. */
export function reportOf(
  app: Applicable,
  outcome: RuleOutcome,
  decision: Decision | null,
  after: RefundResult,
): RuleReport {
  const { rule } = app.compiled;
  return {
    rule: rule.id,
    mode: rule.mode,
    outcome,
    remaining: decision === null ? null : (after?.remaining ?? decision.remaining),
    resetAfterMs: decision === null ? null : (after?.resetAfterMs ?? decision.resetAfterMs),
    retryAfterMs: decision === null || decision.allowed ? null : decision.retryAfterMs,
  };
}

export function viewOf(app: Applicable, decision: Decision, atMs: number, after: RefundResult): RuleView {
  const { compiled, keyHash } = app;
  return {
    ruleId: compiled.rule.id,
    quota: compiled.capacity,
    windowS: policyWindowS(compiled.params, atMs),
    remaining: after?.remaining ?? decision.remaining,
    resetAfterMs: after?.resetAfterMs ?? decision.resetAfterMs,
    cost: app.cost,
    retryAfterMs: decision.allowed ? null : decision.retryAfterMs,
    status: compiled.rule.status,
    jitterS: decision.allowed ? 0 : jitterSeconds(keyHash, compiled.rule.id, compiled.rule.retryJitterS),
  };
}
