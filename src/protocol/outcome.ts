/**
 * One request's step on a key's record, by what the call asks (`CallKind`). A rule's `block_for` bans the key from a
 * refusal or a charge that did not fit while no ban runs; during a ban every check and probe is refused with its end.
 * Pure; store.ts `callRecord` runs it per request. docs/rules.md, "Counting by the response" and "Holding a caller
 * out", states the semantics.
 */
import type { Decision } from "../algorithms/index.ts";
import {
  activeBan,
  type CheckResult,
  checkRecord,
  type LimiterRecord,
  type LimiterRule,
  peekAlgorithm,
  peekRecord,
} from "./record.ts";

/** `check` (default) decides and charges; `probe` decides without charging; `charge` charges as far as it fits. */
export type CallKind = "check" | "probe" | "charge";

type Step = { readonly result: CheckResult; readonly record: LimiterRecord | null };

/** One request of a call, at `nowMs`. */
export function stepRecord(
  record: LimiterRecord | null,
  rule: LimiterRule,
  cost: number,
  kind: CallKind,
  nowMs: number,
): Step {
  if (kind === "charge") return chargeRecord(record, rule, cost, nowMs);
  const ban = activeBan(record, nowMs);
  if (ban !== null) {
    // The cost must still be one the rule could ever admit: an impossible cost is the same error as without a ban.
    const out = checkRecord(null, { rule, cost }, nowMs);
    if (!out.result.ok) return { result: out.result, record };
    return { result: bannedResult(record, rule, cost, ban.untilMs, nowMs), record };
  }
  const out = checkRecord(record, { rule, cost }, nowMs);
  if (!out.result.ok) return out;
  if (!out.result.decision.allowed) return banFrom(out, rule, cost, nowMs);
  if (kind === "check") return out;
  // A probe that fits charges nothing: the figures are the key's as it stands.
  const peek = peekAlgorithm(record, rule, nowMs);
  const decision: Decision = {
    allowed: true,
    remaining: peek.remaining,
    resetAfterMs: peek.resetAfterMs,
    retryAfterMs: null,
    delayMs: 0,
  };
  return { result: { ok: true, decision, atMs: nowMs }, record };
}

/**
 * Charge `cost` units after the origin answered, as much as fits (the algorithms hold no debt): one that does not fit
 * in full crossed the limit (`allowed` false; a `block_for` ban starts unless one runs).
 */
export function chargeRecord(record: LimiterRecord | null, rule: LimiterRule, cost: number, nowMs: number): Step {
  const possible = checkRecord(null, { rule, cost }, nowMs);
  if (!possible.result.ok) return { result: possible.result, record };
  const fits = peekAlgorithm(record, rule, nowMs).remaining;
  const take = Math.min(cost, fits);
  let current = record;
  let charged = 0;
  if (take >= 1) {
    const out = checkRecord(record, { rule, cost: take }, nowMs);
    // `fits` cost-1 requests fit, so a request of that many units does (every algorithm's remaining is additive).
    if (out.result.ok && out.result.decision.allowed) {
      current = out.record;
      charged = take;
    }
  }
  const over = charged < cost;
  const blockForMs = rule.blockForMs ?? 0;
  if (over && blockForMs > 0 && current !== null && activeBan(current, nowMs) === null) {
    current = withBan(current, blockForMs, nowMs);
  }
  const peek = peekRecord(current, rule, nowMs);
  const decision: Decision = {
    allowed: !over,
    remaining: peek.remaining,
    resetAfterMs: peek.resetAfterMs,
    retryAfterMs: over ? Math.max(1, peek.retryAfterMs ?? 1) : null,
    delayMs: 0,
  };
  const ban = activeBan(current, nowMs);
  const result: CheckResult = {
    ok: true,
    decision,
    atMs: nowMs,
    charged,
    ...(ban === null ? {} : { banUntilMs: ban.untilMs }),
  };
  return { result, record: current };
}

/** A refusal by the algorithm: with `block_for`, the ban starts here, and the answer says its end. */
function banFrom(out: Step, rule: LimiterRule, cost: number, nowMs: number): Step {
  const blockForMs = rule.blockForMs ?? 0;
  if (blockForMs <= 0 || out.record === null) return out;
  const record = withBan(out.record, blockForMs, nowMs);
  return { result: bannedResult(record, rule, cost, nowMs + blockForMs, nowMs), record };
}

function withBan(record: LimiterRecord, blockForMs: number, nowMs: number): LimiterRecord {
  return { ...record, ban: { sinceMs: nowMs, untilMs: nowMs + blockForMs } };
}

/**
 * A refusal during a ban: nothing left, fresh no earlier than the ban's end, and a retry at the ban's end or, when the
 * algorithm alone would still refuse this cost then, when it would admit it (no request coming in between).
 */
function bannedResult(
  record: LimiterRecord | null,
  rule: LimiterRule,
  cost: number,
  untilMs: number,
  nowMs: number,
): CheckResult {
  const waitMs = untilMs - nowMs;
  const own = checkRecord(record, { rule, cost }, nowMs).result;
  const ownRetryMs = own.ok && !own.decision.allowed ? (own.decision.retryAfterMs ?? 0) : 0;
  const resetAfterMs = Math.max(waitMs, peekAlgorithm(record, rule, nowMs).resetAfterMs);
  const retryAfterMs = Math.max(waitMs, ownRetryMs);
  const decision: Decision = { allowed: false, remaining: 0, resetAfterMs, retryAfterMs, delayMs: 0 };
  return { ok: true, decision, atMs: nowMs, banUntilMs: untilMs };
}
