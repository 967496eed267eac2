/** The pure core run request by request at one instant: the reference a batch (or a flood of requests) must equal. */
import { type AlgorithmState, decide } from "../../src/algorithms/index.ts";
import type { AlgorithmParams } from "../../src/rules/types.ts";

export function sequential(
  params: AlgorithmParams,
  state: AlgorithmState | null,
  costs: readonly number[],
  nowMs: number,
) {
  const decisions = [];
  let s = state;
  for (const cost of costs) {
    const out = decide(params, s, cost, nowMs);
    decisions.push(out.ok ? { ok: true, decision: out.decision } : out);
    if (out.ok) s = out.state;
  }
  return { decisions, state: s };
}
