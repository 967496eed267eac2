/**
 * Composition: what the answers of every rule that applied to a request add up to. Pure (no I/O, no clock), so a
 * table test drives it (test/unit/compose.test.ts).
 *
 * - A request is admitted only if every enforcing rule admits it and none failed closed.
 * - An enforcing denial wins over a closed failure (the caller learns when to retry); a closed failure answers 503.
 * - When the request is not admitted, every rule that did admit it (shadow rules too) is refunded, and a failed call
 *   still running is refunded if its late answer admits: a denied request costs nothing anywhere.
 * - Shadow rules never block; their would-be denials are reported. A rule that fails open is skipped.
 * - An admitted request waits for the longest shaping delay among the enforcing rules (a decision's `delay_ms`).
 */
import type { Decision } from "../algorithms/index.ts";

/** What one rule's answer counts as in the metrics. */
export type RuleOutcome =
  | "allowed"
  /** Admitted by this rule, denied by another, and refunded. */
  | "refunded"
  | "denied"
  | "shadow_denied"
  | "fail_open"
  | "fail_closed"
  | "cost_exceeds_capacity"
  /** Not asked: another rule was already known to deny (blocked-key cache). */
  | "not_asked";

/** What composition needs to know of one rule's answer. */
export type Answer =
  | { readonly mode: "enforce" | "shadow"; readonly kind: "decided"; readonly decision: Decision }
  | { readonly mode: "enforce" | "shadow"; readonly kind: "failed"; readonly reason: "fail_open" | "fail_closed" };

export type Verdict =
  | { readonly kind: "admit"; readonly delayMs: number }
  /** Indices of the enforcing rules that denied, in rule order. */
  | { readonly kind: "deny"; readonly denying: readonly number[] }
  /** Indices of the enforcing rules that failed closed, in rule order. */
  | { readonly kind: "fail_closed"; readonly failed: readonly number[] };

export interface Composition {
  readonly verdict: Verdict;
  /** Indices of the answers whose charge is given back now (decided admissions of a request that was not admitted). */
  readonly refund: readonly number[];
  /** Whether a failed call that is still running is refunded if it turns out to have admitted. */
  readonly refundLate: boolean;
  /** What each rule's answer counts as in the metrics, by index. */
  readonly outcomes: readonly RuleOutcome[];
}

export function compose(answers: readonly Answer[]): Composition {
  const denying: number[] = [];
  const failed: number[] = [];
  let delayMs = 0;
  answers.forEach((a, i) => {
    if (a.mode !== "enforce") return;
    if (a.kind === "failed") {
      if (a.reason === "fail_closed") failed.push(i);
    } else if (!a.decision.allowed) denying.push(i);
    else delayMs = Math.max(delayMs, a.decision.delayMs);
  });
  const verdict: Verdict =
    denying.length > 0
      ? { kind: "deny", denying }
      : failed.length > 0
        ? { kind: "fail_closed", failed }
        : { kind: "admit", delayMs };
  const admitted = verdict.kind === "admit";
  const refund: number[] = [];
  const outcomes = answers.map((a, i): RuleOutcome => {
    if (a.kind === "failed") return a.reason;
    if (!a.decision.allowed) return a.mode === "shadow" ? "shadow_denied" : "denied";
    if (admitted) return "allowed";
    refund.push(i);
    return a.mode === "shadow" ? "allowed" : "refunded";
  });
  return { verdict, refund, refundLate: !admitted, outcomes };
}
