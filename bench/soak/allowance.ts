/**
 * What a rule allows one key, from the rule's algorithm parameters (the very `AlgorithmParams` the Worker runs), and
 * how far a key's observed admissions go beyond it. An admission is observed from the client: the limiter decided it
 * at some instant in `[sentMs, receivedMs]`, and every bound is applied so that this uncertainty can only loosen it,
 * so a positive excess is a real over-admission, not a measuring artefact.
 *
 * - token_bucket, gcra, leaky_bucket: at most `burst + rate × t` cost in any span of `t` ms.
 * - leaky_queue: at most `burst + c + rate × t`, `c` the largest single cost in the span (admission looks only at the
 *   queue's wait, so the last admitted request may bring its whole cost).
 * - fixed_window and sliding_counter: at most `limit` per epoch-aligned window (a sliding estimate is never below the
 *   current window's count). sliding_log: at most `limit` in every span of `window` ms.
 *
 * Rate rules check every span between two admissions (in bins for very many, which only widens each span); window
 * rules every window with the admissions certainly inside it.
 */
import { floorDiv } from "../../src/algorithms/arith.ts";
import { windowIndex } from "../../src/algorithms/windows.ts";
import type { AlgorithmParams, Rate } from "../../src/rules/types.ts";

/** One admission as the client saw it. */
export interface Admission {
  /** When the request was sent, ms (wall clock). */
  readonly sentMs: number;
  /** When its answer arrived, ms (wall clock). */
  readonly receivedMs: number;
  readonly cost: number;
}

export interface KeyVerdict {
  /** Cost admitted over the whole run. */
  readonly admitted: number;
  /** What the rule allows over the whole run (first send to last answer). */
  readonly allowedOverRun: number;
  /** The largest amount by which any span or window exceeded what the rule allows there; 0 when none did. */
  readonly excess: number;
  /** Admissions whose window could not be told (sent in one window, answered in the next): not held to either. */
  readonly ambiguous: number;
}

/** Whole tokens a rate refills in `spanMs`, rounded down (exact integer arithmetic). */
export function refilled(rate: Rate, spanMs: number): number {
  return floorDiv(Math.max(0, spanMs) * rate.tokens, rate.perMs);
}

/** The most cost a rate rule admits in a span of `spanMs` whose largest single cost is `maxCost`. */
export function rateAllowance(params: AlgorithmParams, spanMs: number, maxCost: number): number {
  switch (params.algorithm) {
    case "token_bucket":
    case "gcra":
    case "leaky_bucket":
      return params.burst + refilled(params.rate, spanMs);
    case "leaky_queue":
      return params.burst + maxCost + refilled(params.rate, spanMs);
    default:
      throw new Error(`${params.algorithm} is not a rate algorithm`);
  }
}

export function verdictOf(params: AlgorithmParams, admissions: readonly Admission[]): KeyVerdict {
  const sorted = [...admissions].sort((a, b) => a.sentMs - b.sentMs);
  const admitted = sorted.reduce((sum, a) => sum + a.cost, 0);
  if (sorted.length === 0) return { admitted, allowedOverRun: 0, excess: 0, ambiguous: 0 };
  const firstMs = Math.floor(sorted[0]!.sentMs);
  const lastMs = Math.ceil(Math.max(...sorted.map((a) => a.receivedMs)));
  switch (params.algorithm) {
    case "token_bucket":
    case "gcra":
    case "leaky_bucket":
    case "leaky_queue": {
      const maxCost = Math.max(...sorted.map((a) => a.cost));
      return {
        admitted,
        allowedOverRun: rateAllowance(params, lastMs - firstMs, maxCost),
        excess: rateExcess(params, sorted),
        ambiguous: 0,
      };
    }
    case "fixed_window":
    case "sliding_counter": {
      const window = params.algorithm === "fixed_window" ? params.window : { kind: "ms" as const, ms: params.windowMs };
      const perWindow = new Map<number, number>();
      let ambiguous = 0;
      for (const a of sorted) {
        const i = windowIndex(window, Math.floor(a.sentMs));
        if (i !== windowIndex(window, Math.ceil(a.receivedMs))) {
          ambiguous++;
          continue;
        }
        perWindow.set(i, (perWindow.get(i) ?? 0) + a.cost);
      }
      let excess = 0;
      for (const cost of perWindow.values()) excess = Math.max(excess, cost - params.limit);
      const windows = windowIndex(window, lastMs) - windowIndex(window, firstMs) + 1;
      return { admitted, allowedOverRun: params.limit * windows, excess, ambiguous };
    }
    case "sliding_log":
    case "concurrency": {
      // concurrency: a soak's clients never give a slot back, so every slot is held for its whole lease and the rule
      // is a sliding log of `slot_ttl` (with releases, admissions are bounded in flight, not per span).
      const windowMs = params.algorithm === "concurrency" ? params.slotTtlMs : params.windowMs;
      // Any span [x, x + W) holds at most `limit`; the worst x starts at some admission's send time.
      let excess = 0;
      for (let i = 0; i < sorted.length; i++) {
        const startMs = Math.floor(sorted[i]!.sentMs);
        let cost = 0;
        for (let j = i; j < sorted.length && sorted[j]!.sentMs < startMs + windowMs; j++)
          if (Math.ceil(sorted[j]!.receivedMs) < startMs + windowMs) cost += sorted[j]!.cost;
        excess = Math.max(excess, cost - params.limit);
      }
      const spans = Math.ceil((lastMs - firstMs + 1) / windowMs);
      return { admitted, allowedOverRun: params.limit * spans, excess, ambiguous: 0 };
    }
    default: {
      const never: never = params;
      return never;
    }
  }
}

/** Bins of admissions (by send time), so that a key with very many admissions is checked in O(bins²). */
interface Bin {
  readonly firstSentMs: number;
  lastReceivedMs: number;
  cost: number;
  maxCost: number;
}

const MAX_BINS = 2_000;

/**
 * The largest `cost(i..j) − allowance(span)` over runs of consecutive admissions (by send time), the span running
 * from the first one's send to the latest answer among them: every server-side decision of the run lies inside it.
 */
function rateExcess(params: AlgorithmParams, sorted: readonly Admission[]): number {
  const bins: Bin[] = [];
  const widthMs =
    sorted.length <= MAX_BINS ? 0 : Math.ceil((sorted[sorted.length - 1]!.sentMs - sorted[0]!.sentMs + 1) / MAX_BINS);
  for (const a of sorted) {
    const last = bins[bins.length - 1];
    if (last !== undefined && widthMs > 0 && a.sentMs - last.firstSentMs < widthMs) {
      last.cost += a.cost;
      last.maxCost = Math.max(last.maxCost, a.cost);
      last.lastReceivedMs = Math.max(last.lastReceivedMs, Math.ceil(a.receivedMs));
    } else {
      bins.push({
        firstSentMs: Math.floor(a.sentMs),
        lastReceivedMs: Math.ceil(a.receivedMs),
        cost: a.cost,
        maxCost: a.cost,
      });
    }
  }
  let excess = 0;
  for (let i = 0; i < bins.length; i++) {
    let cost = 0;
    let maxCost = 0;
    let untilMs = 0;
    for (let j = i; j < bins.length; j++) {
      const bin = bins[j]!;
      cost += bin.cost;
      maxCost = Math.max(maxCost, bin.maxCost);
      untilMs = Math.max(untilMs, bin.lastReceivedMs);
      excess = Math.max(excess, cost - rateAllowance(params, untilMs - bins[i]!.firstSentMs, maxCost));
    }
  }
  return excess;
}
