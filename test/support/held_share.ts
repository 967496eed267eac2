/**
 * Shares a delegate holds, for table tests: a rate share of `parts` of `rule` with the bucket `state`, and a window
 * share of 10 units (4 left) granted 7 ms before `nowMs`, each for one term (1 s, renewed from 750 ms); `over`
 * replaces any field.
 */
import type { AlgorithmState } from "../../src/algorithms/index.ts";
import type { HeldShare } from "../../src/protocol/delegate.ts";
import type { ShareAsk, ShareGrant } from "../../src/protocol/share.ts";
import type { LimiterRule } from "../../src/protocol/store.ts";

export function heldRateShare(
  rule: LimiterRule,
  parts: number,
  state: AlgorithmState | null,
  atMs: number,
  over: Partial<HeldShare> = {},
): HeldShare {
  return {
    kind: "rate",
    rule,
    parts,
    state,
    units: 0,
    unitsLeft: 0,
    short: false,
    atMs,
    endsAtMs: atMs + 1000,
    renewAtMs: atMs + 750,
    ...over,
  };
}

export function heldWindowShare(rule: LimiterRule, nowMs: number, over: Partial<HeldShare> = {}): HeldShare {
  return {
    kind: "window",
    rule,
    parts: 0,
    state: null,
    units: 10,
    unitsLeft: 4,
    short: false,
    atMs: nowMs - 7,
    endsAtMs: nowMs + 1000,
    renewAtMs: nowMs + 750,
    ...over,
  };
}

/** A rate grant of `parts` of `rule` made at `atMs` for one term (1 s); `over` replaces any field. */
export function rateGrantOf(
  rule: LimiterRule,
  parts: number,
  atMs: number,
  over: Partial<ShareGrant> = {},
): ShareGrant {
  return { atMs, kind: "rate", parts, units: 0, remaining: 0, termMs: 1000, rule, hot: true, ...over };
}

/** A rate share's ask from `holder` with `demand` and nothing given back; `over` replaces any field. */
export function shareAskOf(
  rule: LimiterRule,
  holder: string,
  id: string,
  demand: number,
  over: Partial<ShareAsk> = {},
): ShareAsk {
  return { rule, holder, id, demand, units: 0, giveBack: [], ...over };
}
