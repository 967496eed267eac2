/**
 * The decision scratch the fast paths write into (`DecisionScratch`, types.ts), and the copy a caller that keeps a
 * decision makes at its boundary. The fields are in `Decision`'s order, so a copy prints as a decision always did.
 */
import type { Decision, DecisionScratch, PackedStep, RowKernel } from "./types.ts";

/** A new scratch (one per caller that decides, made once: a store, a replayed rule). */
export function decisionScratch(): DecisionScratch {
  return { allowed: false, remaining: 0, resetAfterMs: 0, retryAfterMs: null, delayMs: 0 };
}

/** A new packed step (one per caller, made once). */
export function packedStep(): PackedStep {
  return { changed: false, stored: 0 };
}

/** The decision in `s`, as an object of its own to keep. */
export function decisionOf(s: DecisionScratch): Decision {
  return {
    allowed: s.allowed,
    remaining: s.remaining,
    resetAfterMs: s.resetAfterMs,
    retryAfterMs: s.retryAfterMs,
    delayMs: s.delayMs,
  };
}

/** Write an admission into `d`. */
export function admitInto(d: DecisionScratch, remaining: number, resetAfterMs: number, delayMs: number): void {
  d.allowed = true;
  d.remaining = remaining;
  d.resetAfterMs = resetAfterMs;
  d.retryAfterMs = null;
  d.delayMs = delayMs;
}

/** Write a refusal into `d`. */
export function refuseInto(d: DecisionScratch, remaining: number, resetAfterMs: number, retryAfterMs: number): void {
  d.allowed = false;
  d.remaining = remaining;
  d.resetAfterMs = resetAfterMs;
  d.retryAfterMs = retryAfterMs;
  d.delayMs = 0;
}

/**
 * A row kernel's `check` from its `into`: the decision copied out of a scratch made once per kernel (the kernel's
 * callers in tests and shells that keep decisions).
 */
export function checkFromInto(into: RowKernel<unknown>["into"]): RowKernel<unknown>["check"] {
  const scratch = decisionScratch();
  return (row, at, fresh, cost, nowMs, out) => {
    into(row, at, fresh, cost, nowMs, scratch, out);
    return decisionOf(scratch);
  };
}

/** Copy `decision` into `d` (a kernel's rare path through the pure core). */
export function copyInto(d: DecisionScratch, decision: Decision): void {
  d.allowed = decision.allowed;
  d.remaining = decision.remaining;
  d.resetAfterMs = decision.resetAfterMs;
  d.retryAfterMs = decision.retryAfterMs;
  d.delayMs = decision.delayMs;
}

/** A packed path's `check` from its `into`: `null` for a fresh key is NaN to `into`, and the decision is copied out. */
export function packedCheckFromInto<P>(
  into: (
    params: P,
    stored: number,
    nowScaled: number,
    cost: number,
    decision: DecisionScratch,
    step: PackedStep,
  ) => void,
): (
  params: P,
  stored: number | null,
  nowScaled: number,
  cost: number,
) => { decision: Decision; stored: number | null } {
  const scratch = decisionScratch();
  const step = packedStep();
  return (params, stored, nowScaled, cost) => {
    into(params, stored ?? Number.NaN, nowScaled, cost, scratch, step);
    return { decision: decisionOf(scratch), stored: step.changed ? step.stored : null };
  };
}
