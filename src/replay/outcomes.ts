/**
 * The replay engine's side for rules that count by the response or ban (`count_when`, `cost_header`, `block_for`):
 * their keys are decided on records, as their Durable Objects decide them (src/protocol/outcome.ts: a probe before
 * forwarding, a check for a ban rule, a charge after the response), and the charges wait until their response's time:
 * a request at `t_ms` with a duration `d` is charged at `t_ms + d`, before any request later than that (a request at
 * the same millisecond comes first). A trace without a status for a request charges nothing for it.
 */
import type { Decision } from "../algorithms/index.ts";
import { type CallKind, stepRecord } from "../protocol/outcome.ts";
import { type LimiterRecord, type LimiterRule, refundRecord } from "../protocol/store.ts";
import type { CompiledRule } from "../request/match.ts";
import { chargeOf, isDeferred, needsObject } from "../rules/outcome.ts";

/** What a trace says the origin answered a request: its status and how long it took, ms. */
export interface Outcome {
  readonly status: number;
  readonly durationMs: number;
}

interface Pending {
  readonly dueMs: number;
  readonly seq: number;
  readonly rule: number;
  readonly key: number;
  readonly cost: number;
}

export class OutcomeBook {
  /** Per rule place: its records by key number, for the rules that need them; `null` for the others. */
  private readonly records: (Map<number, LimiterRecord | null> | null)[];
  private readonly limiterRules: (LimiterRule | null)[];
  /** Charges not yet due, in (due, arrival) order. */
  private pending: Pending[] = [];
  private seq = 0;

  constructor(private readonly compiled: readonly CompiledRule[]) {
    this.records = compiled.map((c) => (needsObject(c.rule) ? new Map() : null));
    this.limiterRules = compiled.map((c) =>
      needsObject(c.rule)
        ? { id: c.rule.id, params: c.params, ...(c.rule.blockForMs === null ? {} : { blockForMs: c.rule.blockForMs }) }
        : null,
    );
  }

  /** Whether the rule at `place` is decided here. */
  handles(place: number): boolean {
    return this.records[place] !== null;
  }

  /** Apply the charges due by `tMs` (strictly before it: a request at the same millisecond goes first). */
  settle(tMs: number): void {
    let n = 0;
    while (n < this.pending.length && this.pending[n]!.dueMs < tMs) n++;
    if (n === 0) return;
    for (const p of this.pending.splice(0, n)) {
      const records = this.records[p.rule]!;
      const out = stepRecord(records.get(p.key) ?? null, this.limiterRules[p.rule]!, p.cost, "charge", p.dueMs);
      records.set(p.key, out.record);
    }
  }

  /** Decide one request of a handled rule: a probe for a deferred rule, else a check (a ban rule). */
  ask(
    place: number,
    key: number,
    cost: number,
    tMs: number,
  ): { decision: Decision | null; before: LimiterRecord | null; after: LimiterRecord | null } {
    const records = this.records[place]!;
    const kind: CallKind = isDeferred(this.compiled[place]!.rule) ? "probe" : "check";
    const before = records.get(key) ?? null;
    const out = stepRecord(before, this.limiterRules[place]!, cost, kind, tMs);
    records.set(key, out.record);
    return { decision: out.result.ok ? out.result.decision : null, before, after: out.record };
  }

  /** Give back an admission of a ban rule (a probe charged nothing). */
  giveBack(place: number, key: number, cost: number, admittedAtMs: number, tMs: number): LimiterRecord | null {
    const records = this.records[place]!;
    if (isDeferred(this.compiled[place]!.rule)) return records.get(key) ?? null;
    const out = refundRecord(records.get(key) ?? null, { rule: this.limiterRules[place]!, cost, admittedAtMs }, tMs);
    records.set(key, out.record);
    return out.record;
  }

  /** An admitted request of a deferred rule, with what the origin answered: its charge, due at its response. */
  answered(place: number, key: number, cost: number, tMs: number, outcome: Outcome | null): void {
    const compiled = this.compiled[place]!;
    if (outcome === null || !isDeferred(compiled.rule)) return;
    const charge = chargeOf(compiled.rule, { status: outcome.status, header: () => null }, cost, compiled.capacity);
    if (charge.cost < 1) return;
    const p: Pending = { dueMs: tMs + outcome.durationMs, seq: this.seq++, rule: place, key, cost: charge.cost };
    let i = this.pending.length;
    while (i > 0 && this.pending[i - 1]!.dueMs > p.dueMs) i--;
    this.pending.splice(i, 0, p);
  }
}
