/** One request's step on a key's record by `CallKind`, with bans (docs/rules.md, "Holding a caller out"). */
import { costError, type Decision, decide } from "../algorithms/index.ts";
import {
  activeBan,
  bannedResult,
  type CheckResult,
  chargeUnits,
  checkRecord,
  type LimiterRecord,
  type LimiterRule,
  peekAlgorithm,
  peekRecord,
  peekState,
  ruleFor,
  type Step,
  stateOf,
} from "./record.ts";

/** `check` (default) decides and charges; `probe` decides without charging; `charge` charges as far as it fits. */
export type CallKind = "check" | "probe" | "charge";

type Checked = Step<CheckResult>;

/** One request of a call, at `nowMs`. */
export function stepRecord(
  record: LimiterRecord | null,
  rule: LimiterRule,
  cost: number,
  kind: CallKind,
  nowMs: number,
): Checked {
  if (kind === "charge") return chargeRecord(record, rule, cost, nowMs);
  const ban = activeBan(record, nowMs);
  if (ban !== null) {
    // The cost must still be one the rule could ever admit: an impossible cost is the same error as without a ban.
    const error = costError(rule.params, cost);
    if (error !== null) return { result: { ok: false, error }, record };
    return { result: bannedResult(record, rule, cost, ban.untilMs, nowMs), record };
  }
  if (kind === "probe") {
    // A probe that fits charges nothing, so it is decided on the state alone: no new record is built to be dropped.
    const params = ruleFor(record, rule).params;
    const state = stateOf(record, params, nowMs);
    const own = decide(params, state, cost, nowMs);
    if (!own.ok) return { result: own, record };
    if (own.decision.allowed) {
      // The figures are the key's as it stands: a cost-1 peek.
      const { remaining, resetAfterMs } = peekState(params, state, nowMs);
      const decision: Decision = { allowed: true, remaining, resetAfterMs, retryAfterMs: null, delayMs: 0 };
      return { result: { ok: true, decision, atMs: nowMs }, record };
    }
  }
  const out = checkRecord(record, { rule, cost }, nowMs);
  const blockForMs = rule.blockForMs ?? 0;
  if (!out.result.ok || out.result.decision.allowed || blockForMs <= 0 || out.record === null) return out;
  // A refusal by the algorithm with `block_for`: the ban starts here, and the answer says its end.
  const banned = withBan(out.record, blockForMs, nowMs);
  return { result: bannedResult(banned, rule, cost, nowMs + blockForMs, nowMs), record: banned };
}

/** Charge `cost` units after the origin answered, as much as fits (no debt); not all: over (a ban may start). */
export function chargeRecord(record: LimiterRecord | null, rule: LimiterRule, cost: number, nowMs: number): Checked {
  const impossible = costError(rule.params, cost);
  if (impossible !== null) return { result: { ok: false, error: impossible }, record };
  const fits = peekAlgorithm(record, rule, nowMs).remaining;
  // `fits` cost-1 requests fit, so a request of that many units does (every algorithm's remaining is additive).
  const { record: out, units: charged } = chargeUnits(record, rule, Math.min(cost, fits), nowMs);
  const over = charged < cost;
  const blockForMs = rule.blockForMs ?? 0;
  const banStarts = over && blockForMs > 0 && out !== null && activeBan(out, nowMs) === null;
  const current = banStarts ? withBan(out, blockForMs, nowMs) : out;
  const { remaining, resetAfterMs, retryAfterMs: waitMs, banUntilMs } = peekRecord(current, rule, nowMs);
  const retryAfterMs = over ? Math.max(1, waitMs ?? 1) : null;
  const decision: Decision = { allowed: !over, remaining, resetAfterMs, retryAfterMs, delayMs: 0 };
  const ban = banUntilMs === undefined ? {} : { banUntilMs };
  return { result: { ok: true, decision, atMs: nowMs, charged, ...ban }, record: current };
}

function withBan(record: LimiterRecord, blockForMs: number, nowMs: number): LimiterRecord {
  return { ...record, ban: { sinceMs: nowMs, untilMs: nowMs + blockForMs } };
}
