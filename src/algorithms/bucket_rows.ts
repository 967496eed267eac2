/**
 * Row kernels for the rate family (gcra, leaky_queue, token_bucket, leaky_bucket): the key's state as its own two
 * fields on a shell's typed row, decided in place through the algorithm's packed arithmetic (`PackedPath.into`, the
 * one copy of its decision) on the lead: how far the key is ahead of now, in units of 1/rate.tokens ms. A TAT state
 * (`tatMs, tatFrac`) leads by `(tatMs − now) × a + tatFrac`; a bucket (`scaled, lastMs`, tokens or level) by its
 * deficit at `lastMs` less what `now − lastMs` refilled, at the later of now and `lastMs` (the buckets' clock rule).
 * A TAT further ahead than the burst (only after a clock step back) goes to the algorithm's own `check`.
 * test/unit/row_kernels.test.ts holds every kernel to `decide` and `refund`, state for state.
 */
import { ceilDiv, floorDiv } from "./arith.ts";
import type { Rate } from "./params.ts";
import { checkFromInto, copyInto, packedStep } from "./scratch.ts";
import type { CheckOutcome, DecisionScratch, Own, PackedPath, RowChange, RowKernel } from "./types.ts";

interface RateParams {
  readonly rate: Rate;
  readonly burst: number;
}

interface Tat {
  readonly tatMs: number;
  readonly tatFrac: number;
}

/** gcra and leaky_queue: `tatMs, tatFrac`; `check` is the algorithm's own, for a TAT too far ahead. */
export function tatKernel<P extends RateParams>(
  params: Own<P>,
  packed: PackedPath<P>,
  check: (params: Own<P>, state: Tat | null, cost: number, nowMs: number) => CheckOutcome<Tat>,
): RowKernel<Tat> {
  const { tokens: a, perMs: p } = params.rate;
  const nearMs = ceilDiv(params.burst * p, a);
  const step = packedStep();
  const into: RowKernel<Tat>["into"] = (row, at, fresh, cost, nowMs, d, out) => {
    const tatMs = fresh ? nowMs : row[at]!;
    let lead = 0;
    if (tatMs > nowMs) {
      if (tatMs - nowMs > nearMs) {
        far(row, at, cost, nowMs, d, out);
        return;
      }
      lead = (tatMs - nowMs) * a + row[at + 1]!;
    } else if (tatMs === nowMs) {
      lead = fresh ? 0 : row[at + 1]!;
    }
    packed.into(params, lead, 0, cost, d, step);
    out.changed = step.changed;
    if (step.changed) {
      const whole = floorDiv(step.stored, a);
      row[at] = nowMs + whole;
      row[at + 1] = step.stored - whole * a;
    }
  };
  return {
    width: 2,
    check: checkFromInto(into),
    into,
    refund(row, at, cost) {
      const sum = row[at + 1]! - cost * p;
      const whole = floorDiv(sum, a);
      row[at] = row[at]! + whole;
      row[at + 1] = sum - whole * a;
    },
    read: (row, at) => ({ tatMs: row[at]!, tatFrac: row[at + 1]! }),
  };

  function far(row: Float64Array, at: number, cost: number, nowMs: number, d: DecisionScratch, out: RowChange): void {
    const state = { tatMs: row[at]!, tatFrac: row[at + 1]! };
    const next = check(params, state, cost, nowMs);
    out.changed = next.state !== state;
    row[at] = next.state.tatMs;
    row[at + 1] = next.state.tatFrac;
    copyInto(d, next.decision);
  }
}

/**
 * token_bucket (`tokensScaled, lastMs`, the deficit being `burst × perMs − tokensScaled`) and leaky_bucket
 * (`levelScaled, lastMs`, the level being the deficit): `tokens` says which. Refunds as their own `refund`.
 */
export function bucketKernel<P extends RateParams, S>(
  params: Own<P>,
  packed: PackedPath<P>,
  shape: "tokens" | "level",
  read: (scaled: number, lastMs: number) => S,
): RowKernel<S> {
  const a = params.rate.tokens;
  const p = params.rate.perMs;
  const full = params.burst * p;
  const tokens = shape === "tokens";
  const step = packedStep();
  const into: RowKernel<S>["into"] = (row, at, fresh, cost, nowMs, d, out) => {
    let now = nowMs;
    let lead = 0;
    if (!fresh) {
      const lastMs = row[at + 1]!;
      if (lastMs > now) now = lastMs;
      const deficit = tokens ? full - row[at]! : row[at]!;
      // (now − lastMs) × a may pass 2^53 after a long gap; it is then far above the deficit, as in the algorithm.
      const refilled = (now - lastMs) * a;
      lead = refilled >= deficit ? 0 : deficit - refilled;
    }
    packed.into(params, lead, 0, cost, d, step);
    out.changed = step.changed;
    if (step.changed) {
      row[at] = tokens ? full - step.stored : step.stored;
      row[at + 1] = now;
    }
  };
  return {
    width: 2,
    check: checkFromInto(into),
    into,
    refund(row, at, cost) {
      row[at] = tokens ? Math.min(full, row[at]! + cost * p) : Math.max(0, row[at]! - cost * p);
    },
    read: (row, at) => read(row[at]!, row[at + 1]!),
  };
}
