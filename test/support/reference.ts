/**
 * A literal transcription of the algorithms' exact semantics (docs/rules.md "Algorithms" and "Decisions", and the
 * header of each src/algorithms file) in unbounded rationals (BigInt), with no care for speed or state size: the
 * oracle the fast integer core is compared with, decision for decision.
 * `retry_after_ms` of sliding_counter is found by search from its definition, not by the closed form.
 */
import type { AlgorithmParams } from "../../src/rules/types.ts";

export interface Q {
  readonly n: bigint;
  readonly d: bigint;
}
const Q = (n: bigint | number, d: bigint | number = 1n): Q => {
  let nn = BigInt(n);
  let dd = BigInt(d);
  if (dd < 0n) {
    nn = -nn;
    dd = -dd;
  }
  return { n: nn, d: dd };
};
const add = (a: Q, b: Q) => Q(a.n * b.d + b.n * a.d, a.d * b.d);
const sub = (a: Q, b: Q) => Q(a.n * b.d - b.n * a.d, a.d * b.d);
const mul = (a: Q, b: Q) => Q(a.n * b.n, a.d * b.d);
const div = (a: Q, b: Q) => Q(a.n * b.d, a.d * b.n);
const cmp = (a: Q, b: Q) => {
  const x = a.n * b.d - b.n * a.d;
  return x < 0n ? -1 : x > 0n ? 1 : 0;
};
const min = (a: Q, b: Q) => (cmp(a, b) <= 0 ? a : b);
const max = (a: Q, b: Q) => (cmp(a, b) >= 0 ? a : b);
const floor = (a: Q): number => {
  const q = a.n / a.d;
  return Number(a.n < 0n && q * a.d !== a.n ? q - 1n : q);
};
const ceil = (a: Q): number => 0 - floor(Q(-a.n, a.d));

export interface RefDecision {
  allowed: boolean;
  remaining: number;
  resetAfterMs: number;
  retryAfterMs: number | null;
  delayMs: number;
}

/** A stateful reference limiter for one key. */
export interface RefKey {
  check(cost: number, nowMs: number): RefDecision;
}

export function referenceKey(p: AlgorithmParams): RefKey {
  switch (p.algorithm) {
    case "token_bucket":
    case "gcra":
    case "leaky_bucket":
      return p.algorithm === "gcra" ? refGcra(p.rate.amount, p.rate.periodMs, p.burst) : refBucket(p);
    case "leaky_queue":
      return refQueue(p.rate.amount, p.rate.periodMs, p.burst, p.delay);
    case "fixed_window":
      return refFixed(p);
    case "concurrency":
      // With no release in between (the contract's "no other event"), a slot is held for its whole lease: the decisions
      // are a sliding log's whose entries live `slot_ttl` (src/algorithms/concurrency.ts). Releases: concurrency.test.ts.
      return refLog(p.limit, p.slotTtlMs);
    case "sliding_log":
      return refLog(p.limit, p.windowMs);
    case "sliding_counter":
      return refCounter(p.limit, p.windowMs, p.countDenied, p.buckets);
  }
}

function refBucket(p: Extract<AlgorithmParams, { algorithm: "token_bucket" | "leaky_bucket" }>): RefKey {
  const R = Q(p.rate.amount, p.rate.periodMs);
  const B = Q(p.burst);
  let tokens: Q | null = null;
  let last = 0;
  return {
    check(cost, nowMs) {
      const now = tokens === null ? nowMs : Math.max(nowMs, last);
      const t = tokens === null ? B : min(B, add(tokens, mul(Q(now - last), R)));
      const c = Q(cost);
      if (cmp(t, c) >= 0) {
        tokens = sub(t, c);
        last = now;
        return {
          allowed: true,
          remaining: floor(tokens),
          resetAfterMs: ceil(div(sub(B, tokens), R)),
          retryAfterMs: null,
          delayMs: 0,
        };
      }
      return {
        allowed: false,
        remaining: floor(t),
        resetAfterMs: ceil(div(sub(B, t), R)),
        retryAfterMs: ceil(div(sub(c, t), R)),
        delayMs: 0,
      };
    },
  };
}

function refGcra(amount: number, periodMs: number, burst: number): RefKey {
  const T = Q(periodMs, amount);
  const BT = mul(Q(burst), T);
  let tat: Q | null = null;
  return {
    check(cost, nowMs) {
      const now = Q(nowMs);
      const base = tat === null ? now : max(tat, now);
      const next = add(base, mul(Q(cost), T));
      if (cmp(sub(next, now), BT) <= 0) {
        tat = next;
        const ahead = sub(next, now);
        return {
          allowed: true,
          remaining: floor(div(sub(BT, ahead), T)),
          resetAfterMs: ceil(ahead),
          retryAfterMs: null,
          delayMs: 0,
        };
      }
      const ahead = sub(base, now);
      return {
        allowed: false,
        remaining: Math.max(0, floor(div(sub(BT, ahead), T))),
        resetAfterMs: ceil(ahead),
        retryAfterMs: ceil(sub(sub(next, now), BT)),
        delayMs: 0,
      };
    },
  };
}

function refQueue(amount: number, periodMs: number, burst: number, delay: number): RefKey {
  const T = Q(periodMs, amount);
  const BT = mul(Q(burst), T);
  const zero = Q(0);
  let tat: Q | null = null;
  const remainingAt = (t: Q, now: Q) => Math.max(0, floor(div(sub(BT, max(zero, sub(t, now))), T)) + 1);
  return {
    check(cost, nowMs) {
      const now = Q(nowMs);
      const start = tat === null ? now : max(tat, now);
      const wait = sub(start, now);
      if (cmp(wait, BT) <= 0) {
        tat = add(start, mul(Q(cost), T));
        return {
          allowed: true,
          remaining: remainingAt(tat, now),
          resetAfterMs: ceil(max(zero, sub(tat, now))),
          retryAfterMs: null,
          delayMs: ceil(max(zero, sub(wait, mul(Q(delay), T)))),
        };
      }
      const t = tat as Q;
      return {
        allowed: false,
        remaining: remainingAt(t, now),
        resetAfterMs: ceil(max(zero, sub(t, now))),
        retryAfterMs: ceil(sub(wait, BT)),
        delayMs: 0,
      };
    },
  };
}

function monthIndex(ms: number): number {
  const d = new Date(ms);
  return (d.getUTCFullYear() - 1970) * 12 + d.getUTCMonth();
}
function monthStart(i: number): number {
  return Date.UTC(1970 + Math.floor(i / 12), ((i % 12) + 12) % 12, 1);
}

function refFixed(p: Extract<AlgorithmParams, { algorithm: "fixed_window" }>): RefKey {
  const w = p.window;
  const index = (t: number) => (w.kind === "month" ? monthIndex(t) : Math.floor(t / w.ms));
  const start = (i: number) => (w.kind === "month" ? monthStart(i) : i * w.ms);
  let win = Number.NEGATIVE_INFINITY;
  let count = 0;
  return {
    check(cost, nowMs) {
      let i = index(nowMs);
      let now = nowMs;
      if (win > i) {
        i = win;
        now = start(i);
      }
      const c = win === i ? count : 0;
      const end = start(i + 1) - now;
      if (c + cost <= p.limit) {
        win = i;
        count = c + cost;
        return { allowed: true, remaining: p.limit - count, resetAfterMs: end, retryAfterMs: null, delayMs: 0 };
      }
      return { allowed: false, remaining: p.limit - c, resetAfterMs: c === 0 ? 0 : end, retryAfterMs: end, delayMs: 0 };
    },
  };
}

function refLog(limit: number, windowMs: number): RefKey {
  let log: { t: number; cost: number }[] = [];
  return {
    check(cost, nowMs) {
      const now = log.length > 0 ? Math.max(nowMs, log[log.length - 1]!.t) : nowMs;
      // A denial changes nothing: the entries that left the window are dropped only when a request is logged. (Dropping
      // them on a denial too would remember a later `now` that the clock then steps back from, and count less.)
      const kept = log.filter((e) => now - e.t < windowMs);
      const total = kept.reduce((s, e) => s + e.cost, 0);
      if (total + cost <= limit) {
        log = [...kept, { t: now, cost }];
        return {
          allowed: true,
          remaining: limit - total - cost,
          resetAfterMs: windowMs,
          retryAfterMs: null,
          delayMs: 0,
        };
      }
      // the smallest d at which enough entries have left: search it from the definition
      let d = 1;
      while (kept.filter((e) => now + d - e.t < windowMs).reduce((s, e) => s + e.cost, 0) + cost > limit) {
        d = Math.min(...kept.filter((e) => now + d - e.t < windowMs).map((e) => e.t + windowMs - now));
      }
      return {
        allowed: false,
        remaining: limit - total,
        resetAfterMs: kept.length === 0 ? 0 : kept[kept.length - 1]!.t + windowMs - now,
        retryAfterMs: d,
        delayMs: 0,
      };
    },
  };
}

/**
 * sliding_counter with `buckets: k`, as docs/rules.md writes it: sub-window j = floor(t / w) with w = W / k, c_j what it
 * counted, and at `now` in sub-window s, e = now − s·w:
 * estimate = c_s + … + c_(s−k+1) + c_(s−k) × (w − e) / w. Every sub-window's count is kept (no k + 1 window).
 */
function refCounter(limit: number, windowMs: number, countDenied: boolean, k: number): RefKey {
  const w = windowMs / k;
  const counts = new Map<number, number>();
  let newestSeen = Number.NEGATIVE_INFINITY;
  const c = (j: number) => counts.get(j) ?? 0;
  const estimate = (t: number) => {
    const s = Math.floor(t / w);
    const e = t - s * w;
    let sum = Q(0);
    for (let j = s - k + 1; j <= s; j++) sum = add(sum, Q(c(j)));
    return add(sum, mul(Q(c(s - k)), Q(w - e, w)));
  };
  // the clock rule: a time before the newest sub-window seen is read as that sub-window's start
  const clamp = (t: number) => Math.max(t, newestSeen * w);
  const admits = (t: number, cost: number) => cmp(add(estimate(clamp(t)), Q(cost)), Q(limit)) <= 0;
  return {
    check(cost, nowMs) {
      const now = clamp(nowMs);
      const s = Math.floor(now / w);
      const allowed = admits(now, cost);
      if (allowed || countDenied) {
        counts.set(s, c(s) + cost);
        newestSeen = Math.max(newestSeen, s);
      }
      let retry: number | null = null;
      if (!allowed) {
        // smallest d >= 1 with the same request admitted at now + d: binary search (the estimate never rises)
        let lo = 1;
        let hi = (k + 2) * w;
        while (lo < hi) {
          const mid = Math.floor((lo + hi) / 2);
          if (admits(now + mid, cost)) hi = mid;
          else lo = mid + 1;
        }
        retry = lo;
      }
      let m: number | null = null;
      for (let j = s; j >= s - k; j--) {
        if (c(j) > 0) {
          m = j;
          break;
        }
      }
      return {
        allowed,
        remaining: Math.max(0, floor(sub(Q(limit), estimate(now)))),
        resetAfterMs: m === null ? 0 : (m + k + 1) * w - now,
        retryAfterMs: retry,
        delayMs: 0,
      };
    },
  };
}
