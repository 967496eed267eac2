/**
 * What a key's state "looks like" at an instant, as one number for a chart's state line: tokens in a bucket, the
 * queue's length, a window's count, a sliding counter's estimate. Floating point is fine here: it only draws a line;
 * decisions always come from the exact core.
 */
import type { AlgorithmState, StateOf } from "../algorithms/index.ts";
import { estimateAt } from "../algorithms/sliding_counter.ts";
import { windowIndex } from "../algorithms/windows.ts";
import { type AlgorithmParams, capacityOf } from "../rules/types.ts";

/** What the state line measures for an algorithm, for labels. */
export function levelName(params: AlgorithmParams): string {
  switch (params.algorithm) {
    case "token_bucket":
    case "gcra":
      return "tokens";
    case "leaky_bucket":
      return "bucket level";
    case "leaky_queue":
      return "queued";
    case "fixed_window":
      return "window count";
    case "sliding_log":
      return "in log";
    case "sliding_counter":
      return "estimate";
    default: {
      const never: never = params;
      return never;
    }
  }
}

/** The capacity line drawn on the state chart, as a label: `burst 20`, `limit 100`. */
export function capacityLabel(params: AlgorithmParams): string {
  switch (params.algorithm) {
    case "token_bucket":
    case "gcra":
    case "leaky_bucket":
    case "leaky_queue":
      return `burst ${params.burst}`;
    default:
      return `limit ${capacityOf(params)}`;
  }
}

/** The level `state` shows at `tMs` (no request in between); `state === null` is a fresh key. */
export function levelAt(params: AlgorithmParams, state: AlgorithmState | null, tMs: number): number {
  switch (params.algorithm) {
    case "token_bucket": {
      if (state === null) return params.burst;
      const s = state as StateOf["token_bucket"];
      const { tokens: a, perMs: p } = params.rate;
      return Math.min(params.burst, (s.tokensScaled + Math.max(0, tMs - s.lastMs) * a) / p);
    }
    case "gcra": {
      if (state === null) return params.burst;
      const s = state as StateOf["gcra"];
      const { tokens: a, perMs: p } = params.rate;
      const aheadScaled = (s.tatMs - tMs) * a + s.tatFrac;
      return params.burst - Math.max(0, aheadScaled) / p;
    }
    case "leaky_bucket": {
      if (state === null) return 0;
      const s = state as StateOf["leaky_bucket"];
      const { tokens: a, perMs: p } = params.rate;
      return Math.max(0, (s.levelScaled - Math.max(0, tMs - s.lastMs) * a) / p);
    }
    case "leaky_queue": {
      if (state === null) return 0;
      const s = state as StateOf["leaky_queue"];
      const { tokens: a, perMs: p } = params.rate;
      return Math.max(0, (s.tatMs - tMs) * a + s.tatFrac) / p;
    }
    case "fixed_window": {
      if (state === null) return 0;
      const s = state as StateOf["fixed_window"];
      return windowIndex(params.window, tMs) === s.window ? s.count : 0;
    }
    case "sliding_log": {
      if (state === null) return 0;
      const s = state as StateOf["sliding_log"];
      let total = 0;
      s.times.forEach((t, i) => {
        if (t <= tMs && tMs - t < params.windowMs) total += s.costs[i]!;
      });
      return total;
    }
    case "sliding_counter": {
      return estimateAt(params, state as StateOf["sliding_counter"] | null, tMs);
    }
    default: {
      const never: never = params;
      return never;
    }
  }
}
