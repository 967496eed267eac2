/**
 * How much of a rate rule's charge a late refund may still give back (docs/rules.md, "Composition"): at most the least
 * deficit since its charge (the refill cap took the rest), kept as a staircase of suffix minima (`LOWS_MAX` steps).
 */
import { type AlgorithmState, scaledDeficit } from "../algorithms/index.ts";
import type { AlgorithmParams } from "../rules/types.ts";
import { LOWS_MAX } from "./tunables.ts";

/**
 * `s`: `[tick, deficit]` steps, oldest first, deficits rising: from `tick` on (`2 × ms`, `+ 1` after refunds landed in
 * it) the bucket without the refunded charges lacked at least `deficit` from full. `slack`: how much fuller than the
 * key that bucket may be now. Both in 1/`per` of a request (`per`: the perMs they were taken under).
 */
export type Lows = { readonly s: readonly Step[]; readonly slack: number; readonly per: number };

type Step = readonly [number, number];

/** The perMs deficits of `params` are counted in; `null`: not a bucket (no staircase). */
export function lowsPer(params: AlgorithmParams): number | null {
  return scaledDeficit(params, null, 0) === null ? null : (params as { rate: { perMs: number } }).rate.perMs;
}

/** `lows` in 1/`per` of a request: converted from other parameters' units, rounded on the safe side. */
function inUnits(lows: Lows | undefined, per: number): Lows {
  if (lows === undefined) return { s: [], slack: 0, per };
  if (lows.per === per) return lows;
  const scale = (n: number, up: boolean) => {
    const num = BigInt(n) * BigInt(per);
    const q = num / BigInt(lows.per);
    return Number(up && q * BigInt(lows.per) !== num ? q + 1n : q);
  };
  return { s: lows.s.map(([t, u]) => [t, scale(u, false)] as const), slack: scale(lows.slack, true), per };
}

/** Steps with every step whose deficit is not below a later one's dropped (the staircase's form). */
function suffixMinima(steps: readonly Step[]): Step[] {
  const out: Step[] = [];
  for (const step of steps) {
    while (out.length > 0 && out.at(-1)![1] >= step[1]) out.pop();
    out.push(step);
  }
  return out;
}

/**
 * The staircase with the key's deficit now added, less the slack (a full key resets it); `null`: not a bucket. Noted
 * just before each charge (an even tick: never counts for it) and after each refund (an odd tick: it counts for
 * charges made earlier in the same ms).
 */
export function noteLow(
  lows: Lows | undefined,
  params: AlgorithmParams,
  state: AlgorithmState | null,
  nowMs: number,
  afterRefunds: boolean,
): Lows | null {
  const per = lowsPer(params);
  const deficit = scaledDeficit(params, state, nowMs);
  if (per === null || deficit === null) return null;
  const kept = inUnits(lows, per);
  const slack = deficit === 0 ? 0 : kept.slack;
  // Steps kept are before this one: one with a tick not below it (refunds earlier in this ms, before a call's charges;
  // an object clock that stepped back) moves to just before it, so that it never counts for a charge made now.
  const tick = 2 * nowMs + (afterRefunds ? 1 : 0);
  const units = Math.max(0, deficit - slack);
  const last = kept.s.at(-1);
  // A later charge of the same batch (same instant, more deficit) adds nothing a refund could use.
  if (last !== undefined && last[0] === tick && last[1] <= units) return { ...kept, slack };
  const next = suffixMinima([...kept.s.map(([t, u]): Step => [Math.min(t, tick - 1), u]), [tick, units]]);
  // Too many steps: the two oldest merge into one at the later's time with the smaller deficit (never more back).
  while (next.length > LOWS_MAX) next.splice(0, 2, [next[1]![0], next[0]![1]]);
  return { s: next, slack, per };
}

/**
 * A late refund of `cost` requests of a bucket charged at `admittedAtMs`: what the key may still take back (`given`,
 * 1/perMs of a request), the least deficit since (all when no operation came since: the refund caps it at full); and
 * the staircase after it: `cost` off every step since the charge, what was not given back to the slack.
 */
export function lateRefund(lows: Lows | undefined, params: AlgorithmParams, cost: number, admittedAtMs: number) {
  const per = lowsPer(params)!;
  const kept = inUnits(lows, per);
  const after = kept.s.find(([t]) => t > 2 * admittedAtMs);
  const given = Math.max(0, after === undefined ? cost * per : Math.min(cost * per, after[1]));
  const steps = kept.s.map(([t, u]): Step => (t > 2 * admittedAtMs ? [t, Math.max(0, u - cost * per)] : [t, u]));
  return { given, lows: { s: suffixMinima(steps), slack: kept.slack + (cost * per - given), per } };
}
