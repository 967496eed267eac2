/**
 * A rate share a delegate holds, for table tests: `parts` of `rule` with the bucket `state`, granted at `atMs` for
 * one term (1 s, renewed from 750 ms); `over` replaces any field.
 */
import type { AlgorithmState } from "../../src/algorithms/index.ts";
import type { HeldShare } from "../../src/protocol/delegate.ts";
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
