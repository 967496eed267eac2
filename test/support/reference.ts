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
    case "sliding_log":
      return refLog(p.limit, p.windowMs);
    case "sliding_counter":
      return refCounter(p.limit, p.windowMs, p.countDenied);
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
      log = log.filter((e) => now - e.t < windowMs);
      const total = log.reduce((s, e) => s + e.cost, 0);
      if (total + cost <= limit) {
        log.push({ t: now, cost });
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
      while (log.filter((e) => now + d - e.t < windowMs).reduce((s, e) => s + e.cost, 0) + cost > limit) {
        d = Math.min(...log.filter((e) => now + d - e.t < windowMs).map((e) => e.t + windowMs - now));
      }
      return {
        allowed: false,
        remaining: limit - total,
        resetAfterMs: log.length === 0 ? 0 : log[log.length - 1]!.t + windowMs - now,
        retryAfterMs: d,
        delayMs: 0,
      };
    },
  };
}

function refCounter(limit: number, windowMs: number, countDenied: boolean): RefKey {
  let win = Number.NEGATIVE_INFINITY;
  let prevC = 0;
  let currC = 0;
  const view = (i: number) =>
    win === i ? { prev: prevC, curr: currC } : win === i - 1 ? { prev: currC, curr: 0 } : { prev: 0, curr: 0 };
  const estimate = (t: number, i: number, v: { prev: number; curr: number }) =>
    add(mul(Q(v.prev), Q(windowMs - (t - i * windowMs), windowMs)), Q(v.curr));
  const admits = (t: number, cost: number) => {
    const i = Math.max(Math.floor(t / windowMs), win);
    return cmp(add(estimate(Math.max(t, i * windowMs), i, view(i)), Q(cost)), Q(limit)) <= 0;
  };
  return {
    check(cost, nowMs) {
      let i = Math.floor(nowMs / windowMs);
      let now = nowMs;
      if (win > i) {
        i = win;
        now = i * windowMs;
      }
      const v = view(i);
      const allowed = cmp(add(estimate(now, i, v), Q(cost)), Q(limit)) <= 0;
      if (allowed || countDenied) {
        win = i;
        prevC = v.prev;
        currC = v.curr + cost;
      }
      const after = view(i);
      const est = estimate(now, i, after);
      let retry: number | null = null;
      if (!allowed) {
        // smallest d >= 1 with the same request admitted at now + d: binary search (admission is monotone in time)
        let lo = 1;
        let hi = 3 * windowMs;
        while (lo < hi) {
          const mid = Math.floor((lo + hi) / 2);
          if (admits(now + mid, cost)) hi = mid;
          else lo = mid + 1;
        }
        retry = lo;
      }
      const end = (i + 1) * windowMs - now;
      return {
        allowed,
        remaining: Math.max(0, floor(sub(Q(limit), est))),
        resetAfterMs: after.curr > 0 ? end + windowMs : after.prev > 0 ? end : 0,
        retryAfterMs: retry,
        delayMs: 0,
      };
    },
  };
}
