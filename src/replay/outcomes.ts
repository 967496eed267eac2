/**
 * The replay engine's side for what happens after the origin answers. Rules that count by the response or ban
 * (`count_when`, `cost_header`, `block_for`) are decided on records, as their Durable Objects decide them
 * (src/protocol/outcome.ts: a probe before forwarding, a check for a ban rule, a charge after the response), and the
 * charges wait until their response's time: a request at `t_ms` with a duration `d` is charged at `t_ms + d`, before
 * any request later than that (a request at the same millisecond comes first). A concurrency slot is held over
 * `[t_ms, t_ms + d)`: given back before any request at `t_ms + d` or later, and its lease renewed every half `slot_ttl`
 * meanwhile, as the gateway renews it while the response streams. A request without a status charges nothing;
 * without a duration, its charge is due at once and its slot is held until its lease (`slot_ttl`) ends. Where the
 * algorithm's row kernel allows it (outcome_rows.ts: a sliding_log up to its row limit), a rule's records are typed
 * rows decided in place, to the same decisions.
 */
import { type AlgorithmState, type Decision, slotPolicy } from "../algorithms/index.ts";
import { type CallKind, stepRecord } from "../protocol/outcome.ts";
import { releaseRecord, renewRecord } from "../protocol/slots.ts";
import { type LimiterRecord, type LimiterRule, refundRecord } from "../protocol/store.ts";
import type { CompiledRule } from "../request/match.ts";
import { chargeOf, isDeferred, needsObject, type ResponseFacts } from "../rules/outcome.ts";
import { DueQueue } from "./due_queue.ts";
import { type OutcomeRows, outcomeRowsFor } from "./outcome_rows.ts";

/** What a trace says the origin answered a request: its status, how long it took and its response headers. */
export interface Outcome {
  readonly status: number;
  /** ms from the request to the end of its response; `null`: not known. */
  readonly durationMs: number | null;
  /** Response headers the trace carries (lower-case names), for `cost_header` and `count_when.header`. */
  readonly headers?: ReadonlyMap<string, string>;
}

/** Gives back (or renews) a slot of a rule decided on states (not records): (rule, key, slot id, time, renew). */
export type ReleaseSlot = (rule: number, key: number, slot: number, atMs: number, renew: boolean) => void;

export class OutcomeBook {
  /** Per rule place: its records by key number, for the rules that need them; `null` for the others. */
  private readonly records: (Map<number, LimiterRecord | null> | null)[];
  private readonly limiterRules: (LimiterRule | null)[];
  /** Per rule place: its records as typed rows (outcome_rows.ts), where its kernel allows; then `records` is unused. */
  private readonly rows: (OutcomeRows | null)[];
  /** Per rule place: whether it counts by the response (`count_when`, `cost_header`): asked by a probe. */
  private readonly deferred: boolean[];
  /** Charges not yet due, in (due, arrival) order (typed arrays: no object per charge). */
  private readonly pending = new DueQueue();
  /** The response `chargeOf` reads, reused for every answered request (it keeps nothing). */
  private readonly response: { status: number; headers: ReadonlyMap<string, string> | undefined } & ResponseFacts = {
    status: 0,
    headers: undefined,
    header: (name: string) => this.response.headers?.get(name.toLowerCase()) ?? null,
  };
  /** Slots not yet given back or renewed, in (due, arrival) order: the id as the units, a renewal's end as `until`. */
  private readonly releases = new DueQueue();

  constructor(private readonly compiled: readonly CompiledRule[]) {
    this.records = compiled.map((c) => (needsObject(c.rule) ? new Map() : null));
    this.deferred = compiled.map((c) => isDeferred(c.rule));
    this.limiterRules = compiled.map((c) =>
      needsObject(c.rule)
        ? { id: c.rule.id, params: c.params, ...(c.rule.blockForMs === null ? {} : { blockForMs: c.rule.blockForMs }) }
        : null,
    );
    this.rows = compiled.map((c) => (needsObject(c.rule) ? outcomeRowsFor(c.params, c.rule.blockForMs ?? 0) : null));
  }

  /** Whether the rule at `place` is decided here. */
  handles(place: number): boolean {
    return this.records[place] !== null;
  }

  /**
   * Give back the slots due by `tMs` (at it too) and apply the charges due by `tMs` (strictly before it: a request at
   * the same millisecond goes first). `release` gives back a slot of a rule this book does not decide.
   */
  settle(tMs: number, release: ReleaseSlot): void {
    const releases = this.releases;
    while (releases.firstDueMs <= tMs) {
      releases.pop();
      const {
        poppedRule: rule,
        poppedKey: key,
        poppedCost: slot,
        poppedDueMs: dueMs,
        poppedUntilMs: untilMs,
      } = releases;
      const renew = !Number.isNaN(untilMs);
      const records = this.records[rule];
      if (records === null || records === undefined) release(rule, key, slot, dueMs, renew);
      else {
        const input = { rule: this.limiterRules[rule]!, slots: [slot] };
        const change = renew ? renewRecord : releaseRecord;
        records.set(key, change(records.get(key) ?? null, input, dueMs).record);
      }
      const nextMs = dueMs + this.renewEveryMs(rule);
      if (renew && nextMs < untilMs) releases.push(nextMs, rule, key, slot, untilMs);
    }
    const pending = this.pending;
    while (pending.firstDueMs < tMs) {
      pending.pop();
      const { poppedRule: rule, poppedKey: key } = pending;
      const rows = this.rows[rule];
      if (rows !== null && rows !== undefined) {
        rows.charge(key, pending.poppedCost, pending.poppedDueMs);
        continue;
      }
      const records = this.records[rule]!;
      const out = stepRecord(
        records.get(key) ?? null,
        this.limiterRules[rule]!,
        pending.poppedCost,
        "charge",
        pending.poppedDueMs,
      );
      records.set(key, out.record);
    }
  }

  /** The slot the last `ask` took (`null`: none); read before the next. */
  askedSlot: number | null = null;

  /**
   * Decide one request of a handled rule: a probe for a deferred rule, else a check (a ban rule). `null`: the cost is
   * invalid or above the capacity. The slot it took is left in `askedSlot`. A row rule's decision is its scratch,
   * written again by its next `ask`: read it at once.
   */
  ask(place: number, key: number, cost: number, tMs: number): Decision | null {
    const rows = this.rows[place];
    if (rows !== null && rows !== undefined) {
      this.askedSlot = null;
      return rows.ask(key, cost, this.deferred[place]!, tMs);
    }
    const records = this.records[place]!;
    const kind: CallKind = this.deferred[place]! ? "probe" : "check";
    const before = records.get(key) ?? null;
    const out = stepRecord(before, this.limiterRules[place]!, cost, kind, tMs);
    // A probe of a fresh key leaves it fresh: no entry for it.
    if (out.record !== before) records.set(key, out.record);
    const r = out.result;
    this.askedSlot = (r.ok ? r.slot : null) ?? null;
    return r.ok ? r.decision : null;
  }

  /** The key's algorithm state under a handled rule (`null`: none), for a chart's state track. */
  stateOf(place: number, key: number): AlgorithmState | null {
    const rows = this.rows[place];
    if (rows !== null && rows !== undefined) return rows.stateOf(key);
    return this.records[place]!.get(key)?.state ?? null;
  }

  /** How often the gateway renews a slot of the rule at `place` while its response streams: half its lease, ms. */
  private renewEveryMs(place: number): number {
    const params = this.compiled[place]!.params;
    return (slotPolicy(params)?.leaseMs(params) ?? Number.POSITIVE_INFINITY) / 2;
  }

  /** Give back an admission of a ban rule (a probe charged nothing). */
  giveBack(place: number, key: number, cost: number, admittedAtMs: number, tMs: number): void {
    if (this.deferred[place]!) return;
    const rows = this.rows[place];
    if (rows !== null && rows !== undefined) {
      rows.refund(key, cost, admittedAtMs, tMs);
      return;
    }
    const records = this.records[place]!;
    const out = refundRecord(records.get(key) ?? null, { rule: this.limiterRules[place]!, cost, admittedAtMs }, tMs);
    records.set(key, out.record);
  }

  /**
   * An admitted request, with what the origin answered: a deferred rule's charge, due at its response; and the slot it
   * took (`slot`, concurrency), given back at its response's end when its duration is known.
   */
  answered(place: number, key: number, cost: number, tMs: number, outcome: Outcome | null, slot?: number): void {
    if (outcome === null) return;
    if (slot !== undefined && outcome.durationMs !== null) {
      const untilMs = tMs + outcome.durationMs;
      this.releases.push(untilMs, place, key, slot);
      const renewAtMs = tMs + this.renewEveryMs(place);
      if (renewAtMs < untilMs) this.releases.push(renewAtMs, place, key, slot, untilMs);
    }
    if (!this.deferred[place]!) return;
    const compiled = this.compiled[place]!;
    const response = this.response;
    response.status = outcome.status;
    response.headers = outcome.headers;
    const charge = chargeOf(compiled.rule, response, cost, compiled.capacity);
    if (charge.cost < 1) return;
    this.pending.push(tMs + (outcome.durationMs ?? 0), place, key, charge.cost);
  }
}
