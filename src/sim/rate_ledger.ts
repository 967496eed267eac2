/**
 * A token ledger of one rate rule's run of the cluster SIMULATION (cluster.ts): where the exact single writer's budget
 * (a full bucket at the start plus the rate over the run) went. Sluice admits some; the refusals are counted by who
 * refused (the key's object, a delegate, an isolate locally); unspent tokens by where they went (`LedgerSinks`):
 * refill lost at a full bucket, parts promised to a delegate holding none or fewer, (sub-)lease tokens neither admitted
 * nor given back, units given back a share could not take, tokens a slice drops when its parts change, admissions
 * charged that no isolate counted, the buckets at the end (ledger_tokens.ts); `rest` is what these leave unexplained.
 * Sampled every ms of simulated time from the objects' records (nothing here decides anything), per bin (`LedgerBins`:
 * 100 ms over the first 2 s unless set) and over the run, in tokens (fractions fine: bookkeeping, not algorithm state).
 */
import { type AlgorithmParams, capacityOf, sliceParams } from "../algorithms/index.ts";
import type { DelegateRecord } from "../protocol/delegate.ts";
import { keyPeek, promisedParts, settleShares } from "../protocol/share.ts";
import type { LimiterRecord, LimiterRule } from "../protocol/store.ts";
import { delegateSlice } from "../protocol/sublease.ts";
import { SHARE_PARTS } from "../protocol/tunables.ts";
import type { DelegateWatch } from "./delegate.ts";
import { bucketLevel, directTokens, shareTokens } from "./ledger_tokens.ts";

/** Who refused a request, and why. */
export type DeniedBy =
  /** The key's object: its direct slice (or the whole key, before any share) had no token. */
  | "keyNoTokens"
  /** The key's object: live shares held every part, none left for direct calls. */
  | "keyNoParts"
  /** A delegate: its slice had no token. */
  | "delegateSlice"
  /** A delegate without a share (held off after an overloaded share ask). */
  | "delegateNoShare"
  /** An isolate by itself: a used-up sub-lease (short), or what it last knew (overloaded, busy, timeout). */
  | "isolateLocal"
  | "unknown";

export const DENIED_BY: readonly DeniedBy[] = [
  "keyNoTokens",
  "keyNoParts",
  "delegateSlice",
  "delegateNoShare",
  "isolateLocal",
  "unknown",
];

/** Where unspent tokens went (see the file's comment). */
export interface LedgerSinks {
  overflowDirect: number;
  overflowDelegates: number;
  promisedUnheld: number;
  promisedAboveHeld: number;
  subleaseLost: number;
  givenBackOverflow: number;
  /** A slice's parts changed (a delegate's share adopted, cut or lost; a grant out of the direct slice), net. */
  droppedAtChange: number;
  /** Admissions the key's object or a delegate charged that no isolate counted, net of refunds taken back. */
  unanswered: number;
  left: number;
}

export interface LedgerSpan {
  exact: number;
  admitted: number;
  denied: Record<DeniedBy, number>;
  /** Of `isolateLocal`: answers from what the isolate last knew (the object overloaded, busy, timing out). */
  lastKnown: number;
  overflowDirect: number;
  overflowDelegates: number;
  promisedUnheld: number;
  promisedAboveHeld: number;
  droppedAtChange: number;
  /** Tokens a change made (a grant's moved to a delegate, an ended share's refill until renewed): a negative sink. */
  madeAtChange: number;
  /** Sub-lease tokens: lent by delegates, admitted from any lease (answer time), given back to delegates. */
  lent: number;
  fromLease: number;
  givenBack: number;
  /** Of `givenBack`: tokens the shares took back (net of what settling them lost at a full bucket). */
  restored: number;
  /** Admissions charged by the key's object and the delegates (decision time). */
  charged: number;
  /** At the span's end: tokens in every bucket (live slices and the direct slice). */
  left: number;
  /** At the span's end: tokens in the key's object's direct slice (the whole key's bucket before any share), its parts. */
  leftDirect: number;
  directParts: number;
  /** At the span's end: delegates holding a live rate share, the parts they hold. */
  holders: number;
  heldParts: number;
}

export interface RateLedger {
  /** The exact writer's budget: its burst plus the rate over the run, tokens. */
  readonly supply: number;
  readonly total: LedgerSpan;
  readonly sinks: LedgerSinks;
  /** supply - admitted - sinks: conversions, rounding, tokens moved with a grant that a slice could not take. */
  readonly rest: number;
  /** The run's start per bin (`LedgerBins`). */
  readonly bins: readonly LedgerSpan[];
  readonly binMs: number;
  /** The run's first second (the cold start) as one span, and its budget: the burst and 1 s of the rate. */
  readonly first: LedgerSpan;
  readonly firstSupply: number;
}

/** The ledger's bins: `count` of `ms` each from the run's start (bench/cluster_run.ts `LEDGER_BIN_MS`, `LEDGER_BINS`). */
export interface LedgerBins {
  readonly ms: number;
  readonly count: number;
}
/** The first 2 s per 100 ms. */
export const FIRST_BINS: LedgerBins = { ms: 100, count: 20 };
/** The first second: the cold start. */
const FIRST_MS = 1000;

function emptySpan(): LedgerSpan {
  return {
    exact: 0,
    admitted: 0,
    denied: Object.fromEntries(DENIED_BY.map((d) => [d, 0])) as Record<DeniedBy, number>,
    lastKnown: 0,
    overflowDirect: 0,
    overflowDelegates: 0,
    promisedUnheld: 0,
    promisedAboveHeld: 0,
    droppedAtChange: 0,
    madeAtChange: 0,
    lent: 0,
    fromLease: 0,
    givenBack: 0,
    restored: 0,
    charged: 0,
    left: 0,
    leftDirect: 0,
    directParts: 0,
    holders: 0,
    heldParts: 0,
  };
}

/** A slice's bucket now: its level and its capacity (tokens), `null` without parts or state. */
function level(params: AlgorithmParams | null, state: unknown, nowMs: number): { n: number; cap: number } | null {
  if (params === null || state === null || state === undefined) return null;
  return { n: bucketLevel(params, state, nowMs), cap: capacityOf(params) };
}

/** The refill lost in the next ms by a bucket at level `b.n` refilling `perMs` a ms: what passes its capacity. */
function overflow(b: { n: number; cap: number }, perMs: number): number {
  return Math.max(0, Math.min(perMs, b.n + perMs - b.cap));
}

export class RateLedgerCount {
  readonly total = emptySpan();
  readonly bins: LedgerSpan[];
  readonly first = emptySpan();
  private lastKnownSeen = 0;
  /** Tokens per ms of the whole rate. */
  private readonly perMs: number;

  constructor(
    private readonly rule: LimiterRule,
    private readonly t0Ms: number,
    private readonly endMs: number,
    private readonly clock: () => number,
    private readonly binning: LedgerBins = FIRST_BINS,
  ) {
    this.bins = Array.from({ length: binning.count }, emptySpan);
    const p = rule.params as { rate?: { tokens: number; perMs: number } };
    this.perMs = p.rate === undefined ? 0 : p.rate.tokens / p.rate.perMs;
  }

  private spans(atMs: number): LedgerSpan[] {
    if (atMs < this.t0Ms || atMs >= this.endMs) return [];
    const bin = Math.floor((atMs - this.t0Ms) / this.binning.ms);
    const spans = bin < this.bins.length ? [this.total, this.bins[bin]!] : [this.total];
    return atMs - this.t0Ms < FIRST_MS ? [...spans, this.first] : spans;
  }

  /** What the simulated delegates tell this ledger (delegate.ts `DelegateWatch`); `deniedBy` marks their refusals. */
  watch(deniedBy: WeakMap<object, DeniedBy>): DelegateWatch {
    return {
      decided: (results, withShare) => {
        for (const r of results) deniedBy.set(r, withShare ? "delegateSlice" : "delegateNoShare");
      },
      gaveBack: (units) => this.add({ givenBack: units }),
      spent: (admitted, lent, restored) => this.add({ charged: admitted, lent, restored }),
      changed: (dropped, made) => this.add({ droppedAtChange: dropped, madeAtChange: made }),
    };
  }

  /**
   * The key's object wrote its record: `charged` admissions and `lent` lease units its call decided (0 for a share
   * ask, a refund). Its direct slice's tokens beyond those: dropped at a grant (the tokens moved with it, the rest of
   * its conversion), or made (admissions refunded, lease units given back: taken back into it).
   */
  keyWrote(before: LimiterRecord | null, after: LimiterRecord | null, charged: number, lent: number): void {
    const t = this.now();
    const d = directTokens(before, this.rule, t) - directTokens(after, this.rule, t) - charged - lent;
    this.add({ charged, lent, droppedAtChange: Math.max(0, d), madeAtChange: Math.max(0, -d) });
  }

  private now(): number {
    return this.clock();
  }

  private add(
    counts: Partial<Record<"charged" | "lent" | "givenBack" | "restored" | "droppedAtChange" | "madeAtChange", number>>,
  ): void {
    for (const s of this.spans(this.now())) {
      for (const [k, v] of Object.entries(counts)) s[k as keyof typeof counts] += v ?? 0;
    }
  }

  denied(by: DeniedBy, atMs: number): void {
    for (const s of this.spans(atMs)) s.denied[by]++;
  }

  fromLease(atMs: number): void {
    for (const s of this.spans(atMs)) s.fromLease++;
  }

  /**
   * One ms of the run: the key's record and each delegate's (by holder id), and the isolates' last-known answers so
   * far. Full buckets lose that ms's refill; parts promised to a delegate beyond what it holds lose theirs.
   */
  sample(
    nowMs: number,
    record: LimiterRecord | null,
    delegates: Iterable<{ readonly holder: string; readonly state: DelegateRecord }>,
    lastKnown: number,
  ): void {
    const spans = this.spans(nowMs);
    for (const s of spans) s.lastKnown += lastKnown - this.lastKnownSeen;
    this.lastKnownSeen = lastKnown;
    if (spans.length === 0) return;
    const partMs = this.perMs / SHARE_PARTS;
    const held = new Map<string, number>();
    let left = 0;
    let heldParts = 0;
    for (const { holder, state } of delegates) {
      const share = state.share;
      if (share === null || share.kind !== "rate" || nowMs >= share.endsAtMs || share.parts <= 0) continue;
      held.set(holder, share.parts);
      heldParts += share.parts;
      const b = level(delegateSlice(share.rule.params, share.parts), share.state, nowMs);
      if (b === null) continue;
      left += shareTokens(share, nowMs);
      const lost = overflow(b, share.parts * partMs);
      for (const s of spans) s.overflowDelegates += lost;
    }
    const rec = settleShares(record, nowMs);
    const book = rec?.shares;
    let promised = 0;
    for (const e of book?.entries ?? []) {
      const p = promisedParts(e, nowMs);
      promised += p;
      const h = held.get(e.holder) ?? 0;
      for (const s of spans) {
        if (h === 0) s.promisedUnheld += p * partMs;
        else s.promisedAboveHeld += Math.max(0, p - h) * partMs;
      }
    }
    const direct = Math.max(0, SHARE_PARTS - promised);
    const tokens = directTokens(record, this.rule, nowMs);
    const cap = direct <= 0 ? 0 : capacityOf(sliceParams(this.rule.params, direct, SHARE_PARTS)!);
    left += tokens;
    const lost = direct > 0 ? overflow({ n: tokens, cap }, direct * partMs) : 0;
    for (const s of spans) {
      s.overflowDirect += lost;
      s.left = left;
      s.leftDirect = keyPeek(rec, this.rule, nowMs).remaining;
      s.directParts = direct;
      s.holders = held.size;
      s.heldParts = heldParts;
    }
  }

  /** The ledger, given when each admission counted (the exact writer's side: `withExact`). */
  finish(admissions: readonly number[]): RateLedger {
    for (const at of admissions) for (const s of this.spans(at)) s.admitted++;
    const t = this.total;
    const sinks = sinksOf(t);
    const supply = capacityOf(this.rule.params) + this.perMs * (this.endMs - this.t0Ms);
    const spent = Object.values(sinks).reduce((a, b) => a + b, 0);
    // The first second's budget: the burst and the rate over it (or over the run, if shorter).
    const firstSupply = capacityOf(this.rule.params) + this.perMs * Math.min(FIRST_MS, this.endMs - this.t0Ms);
    const rest = supply - t.admitted - spent;
    return { supply, firstSupply, total: t, sinks, rest, bins: this.bins, binMs: this.binning.ms, first: this.first };
  }
}

/**
 * A span's sinks. Over the run, `subleaseLost` and `left` are what the run ends with; over its first second, what was
 * still out then (sub-lease tokens with isolates, the buckets): spent or lost later, not lost yet.
 */
function sinksOf(t: LedgerSpan): LedgerSinks {
  return {
    overflowDirect: t.overflowDirect,
    overflowDelegates: t.overflowDelegates,
    promisedUnheld: t.promisedUnheld,
    promisedAboveHeld: t.promisedAboveHeld,
    subleaseLost: Math.max(0, t.lent - t.fromLease - t.givenBack),
    givenBackOverflow: t.givenBack - t.restored,
    droppedAtChange: t.droppedAtChange - t.madeAtChange,
    unanswered: t.charged - (t.admitted - t.fromLease),
    left: t.left,
  };
}

/** The ledger with the exact writer's admissions (their times) counted in. */
export function withExact(ledger: RateLedger, exact: readonly number[], t0Ms: number, endMs: number): RateLedger {
  const total = { ...ledger.total, exact: 0 };
  const bins = ledger.bins.map((b) => ({ ...b, exact: 0 }));
  const first = { ...ledger.first, exact: 0 };
  for (const at of exact) {
    if (at < t0Ms || at >= endMs) continue;
    total.exact++;
    if (at - t0Ms < FIRST_MS) first.exact++;
    const bin = Math.floor((at - t0Ms) / ledger.binMs);
    if (bin < bins.length) bins[bin]!.exact++;
  }
  return { ...ledger, total, bins, first };
}

/** A ledger's whole-run figures, in whole tokens (bench/results/cluster.json). */
export interface LedgerTotals {
  readonly supply: number;
  readonly exact: number;
  readonly admitted: number;
  readonly denied: Record<DeniedBy, number>;
  readonly lastKnown: number;
  readonly sinks: Record<keyof LedgerSinks, number>;
  readonly subleases: { readonly lent: number; readonly fromLease: number; readonly givenBack: number };
  readonly rest: number;
  /**
   * The first second apart (the cold start): its budget (the burst and 1 s of the rate), the exact writer's and this
   * run's admissions in it, its sinks (`subleaseLost` and `left`: still out at its end, spent or lost later) and rest.
   */
  readonly firstSecond?: {
    readonly supply: number;
    readonly exact: number;
    readonly admitted: number;
    readonly denied: Record<DeniedBy, number>;
    readonly sinks: Record<keyof LedgerSinks, number>;
    readonly rest: number;
  };
}

const rounded = (sinks: LedgerSinks) =>
  Object.fromEntries(Object.entries(sinks).map(([k, v]) => [k, Math.round(v)])) as Record<keyof LedgerSinks, number>;

export function ledgerTotals(l: RateLedger): LedgerTotals {
  const f = l.first;
  const firstSupply = l.firstSupply;
  const firstSinks = sinksOf(f);
  const firstSpent = Object.values(firstSinks).reduce((a, b) => a + b, 0);
  return {
    supply: Math.round(l.supply),
    exact: l.total.exact,
    admitted: l.total.admitted,
    denied: l.total.denied,
    lastKnown: l.total.lastKnown,
    sinks: rounded(l.sinks),
    subleases: { lent: l.total.lent, fromLease: l.total.fromLease, givenBack: l.total.givenBack },
    rest: Math.round(l.rest),
    firstSecond: {
      supply: Math.round(firstSupply),
      exact: f.exact,
      admitted: f.admitted,
      denied: f.denied,
      sinks: rounded(firstSinks),
      rest: Math.round(firstSupply - f.admitted - firstSpent),
    },
  };
}

/**
 * The ledger's bins as text lines, then the first second as one (bench/cluster.ts `--ledger`). At each bin's
 * end: `left` every bucket's tokens, `dirTok`/`dirPrt` the direct slice's tokens and parts, `hold`/`hldPrt` the
 * delegates holding a live rate share and their parts.
 */
export function ledgerLines(l: RateLedger): string[] {
  const head =
    "   ms  exact  admit | keyTok keyPrt dlgSlc dlgNoS  local(lastKnown) | ovfDir ovfDlg unheld aboveH backOv droppd   made  unans |   lent fromLs   back |   left dirTok dirPrt hold hldPrt";
  const r = (n: number) => Math.round(n).toString().padStart(6);
  const line = (label: string, b: LedgerSpan) => {
    const d = b.denied;
    return `${label.padStart(5)} ${r(b.exact)} ${r(b.admitted)} | ${r(d.keyNoTokens)} ${r(d.keyNoParts)} ${r(d.delegateSlice)} ${r(d.delegateNoShare)} ${r(d.isolateLocal)}(${Math.round(b.lastKnown)}) | ${r(b.overflowDirect)} ${r(b.overflowDelegates)} ${r(b.promisedUnheld)} ${r(b.promisedAboveHeld)} ${r(b.givenBack - b.restored)} ${r(b.droppedAtChange)} ${r(b.madeAtChange)} ${r(b.charged - b.admitted + b.fromLease)} | ${r(b.lent)} ${r(b.fromLease)} ${r(b.givenBack)} | ${r(b.left)} ${r(b.leftDirect)} ${r(b.directParts)} ${String(b.holders).padStart(4)} ${r(b.heldParts)}`;
  };
  return [head, ...l.bins.map((b, i) => line(String(i * l.binMs), b)), line("1st s", l.first)];
}
