/**
 * The one replay engine behind `sluice simulate`, `compare` and `plan`: requests in, in trace order, and each rule's
 * answer out, decided by the core's `decide` (which also refuses a cost above a rule's capacity: the one cost guard).
 * - `keyed(tMs, key, cost)`, for `t_ms,key[,cost]` traces: every rule decides every request alone, under the line's
 *   key and cost (no matching, no composition: the trace says nothing of routes, plans or callers).
 * - `request(line)`, for request traces (request_trace.ts): the gateway's steps through its own pure functions (shape
 *   and canonical path, caller and plan, the rules that apply, the capacity check), then every rule asked and the
 *   answers composed, the admitting rules refunded when the request is not admitted; shadow rules never block.
 * Not replayed: the isolate's approximations (the blocked-key cache, `scope: local` counting per isolate, leases) and
 * the limiter failing; every rule decides as its one Durable Object would.
 */
import { type AlgorithmParams, type AlgorithmState, type Decision, slotPolicy } from "../algorithms/index.ts";
import type { Account } from "../isolate/account_cache.ts";
import { compose } from "../request/compose.ts";
import {
  type Applicable,
  applicableRules,
  type CompiledDeny,
  type CompiledRule,
  compileDenies,
  compileRules,
  denyingRules,
  rejectingRule,
} from "../request/match.ts";
import { headAsGet, shapeWith } from "../request/request_shape.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { type Caller, callerOf, type ReplayOptions } from "./caller.ts";
import { lineKeys, lineSource } from "./line_keys.ts";

export type { ReplayOptions };

import { type Outcome, OutcomeBook } from "./outcomes.ts";
import type { RequestLine } from "./request_trace.ts";
import { KeyIndex, RuleStates } from "./states.ts";

/** One rule's answer to one request. Reused between requests: read it before the next call. */
export interface RuleAnswer {
  /** The rule's place in the rule list. */
  rule: number;
  /** The key's number (`Replayer.keys`). */
  key: number;
  cost: number;
  /** `null`: the cost is above the rule's capacity (nothing was charged). */
  decision: Decision | null;
  /**
   * The key's state before and after this request (after any refund): for the watched key only (`Replayer.watch`,
   * what a chart draws), else `null`; a rule that counts by the response has its record's state for every key.
   */
  before: AlgorithmState | null;
  after: AlgorithmState | null;
  /** Charged, then given back because the request was not admitted. */
  refunded: boolean;
  /** The slot the admission took (concurrency), given back when its response ends; `null`: none. */
  slot: number | null;
}

/** What the gateway answers a replayed request. */
export type Verdict =
  | { readonly kind: "admit"; readonly delayMs: number }
  /** `rules`: the enforcing rules that denied, by place; `status`: the one answered (the longest retry's rule). */
  | { readonly kind: "deny"; readonly rules: readonly number[]; readonly status: number }
  /** A deny rule (by id) matched: refused with its status, nothing counted. */
  | { readonly kind: "forbidden"; readonly rule: string; readonly status: number }
  /** 401: a rule with `unverified: reject` applies to a caller without a verified key. */
  | { readonly kind: "unauthorized"; readonly rule: number }
  /** 400: the request costs more than an enforcing rule can ever admit. */
  | { readonly kind: "too_costly"; readonly rule: number }
  /** 400: the path or method cannot be read. */
  | { readonly kind: "bad_request"; readonly detail: string };

export interface Replayed {
  readonly verdict: Verdict;
  /** The rules that applied, in rule order. */
  readonly answers: readonly RuleAnswer[];
  /** The caller's key number for reports: its API key, else its user, else its address; -1 when it has none. */
  readonly caller: number;
}

const ADMIT: Verdict = { kind: "admit", delayMs: 0 };

const DEFAULT_PATH = { caseSensitive: false, keepEncodedSlash: false, keepParams: false };

/** The Worker's default settings, no accounts file and no deny rules: a replay given no options. */
export const DEFAULT_REPLAY_OPTIONS: ReplayOptions = {
  settings: {
    defaultPlan: "free",
    ipv6PrefixBits: 64,
    path: DEFAULT_PATH,
    ambiguousPaths: "refuse",
    upstreamProfile: "any",
  },
  accounts: null,
};

export class Replayer {
  readonly compiled: readonly CompiledRule[];
  /** The deny rules (`options.denies`), asked first for each request of a request trace. */
  private readonly denies: readonly CompiledDeny[];
  readonly keys: KeyIndex;
  private readonly states: RuleStates[];
  private readonly place = new Map<string, number>();
  /** Per rule, the keys with an account's own parameters. */
  private readonly overridden: Map<number, AlgorithmParams>[];
  /** Per rule, whether its admissions hold a slot until their response ends (concurrency). */
  private readonly holdsSlots: boolean[];
  private readonly pool: RuleAnswer[];
  /** Rules that count by the response or ban, decided on records as their objects decide them (outcomes.ts). */
  private readonly outcomes: OutcomeBook;
  private latestMs = 0;
  /** Whether a rule has a `key:` (then each request's keys are read from its line, key.ts). */
  private readonly hasKeys: boolean;
  /** The key whose states the answers carry (`watch`), its number once it came (-1 before), and the keys then. */
  private watched: string | null = null;
  private watchedKey = -1;
  private keysAtLook = -1;

  constructor(
    readonly rules: readonly ResolvedRule[],
    private readonly options: ReplayOptions = DEFAULT_REPLAY_OPTIONS,
    /** The key numbering, shared by replayers that see the same keys (`plan` runs two over one trace). */
    keys: KeyIndex = new KeyIndex(),
  ) {
    this.keys = keys;
    this.compiled = compileRules(rules);
    this.denies = compileDenies(options.denies ?? []);
    this.hasKeys = rules.some((r) => r.key !== null);
    this.overridden = rules.map(() => new Map());
    this.holdsSlots = this.compiled.map((c) => slotPolicy(c.params) !== undefined);
    this.states = this.compiled.map(
      (c, i) => new RuleStates(c.params, (key) => this.overridden[i]!.get(key) ?? c.params),
    );
    for (const [i, r] of rules.entries()) this.place.set(r.id, i);
    this.outcomes = new OutcomeBook(this.compiled);
    this.pool = rules.map((_, i) => ({
      rule: i,
      key: -1,
      cost: 0,
      decision: null,
      before: null,
      after: null,
      refunded: false,
      slot: null,
    }));
  }

  /** Carry `key`'s states before and after each request in its answers (a chart's state track); `null`: none. */
  watch(key: string | null): void {
    this.watched = key;
    this.watchedKey = -1;
    this.keysAtLook = -1;
  }

  /** Whether `key` is the watched key (looked up again only when new keys came since). */
  private isWatched(key: number): boolean {
    if (this.watched === null) return false;
    if (this.watchedKey < 0 && this.keysAtLook !== this.keys.size) {
      this.watchedKey = this.keys.find(this.watched);
      this.keysAtLook = this.keys.size;
    }
    return key === this.watchedKey;
  }

  /**
   * Every rule alone on one `t_ms,key[,cost[,status,duration_ms]]` line. The answers are in rule order, one per rule.
   * `outcome`: what the origin answered the request, for the rules that count by the response.
   */
  keyed(tMs: number, key: string, cost: number, outcome: Outcome | null = null): readonly RuleAnswer[] {
    if (tMs > this.latestMs) this.latestMs = tMs;
    this.outcomes.settle(tMs, this.releaseSlot);
    const k = this.keys.of(key);
    for (let i = 0; i < this.compiled.length; i++) {
      const answer = this.pool[i]!;
      this.ask(answer, k, cost, tMs);
      if (answer.decision?.allowed === true) this.outcomes.answered(i, k, cost, tMs, outcome, answer.slot ?? undefined);
    }
    return this.pool;
  }

  /** One request of a request trace, through the gateway's steps. */
  request(line: RequestLine): Replayed {
    if (line.tMs > this.latestMs) this.latestMs = line.tMs;
    this.outcomes.settle(line.tMs, this.releaseSlot);
    const shape = shapeWith(headAsGet([line.method]), line.path, this.options.settings);
    if (!shape.ok) return { verdict: { kind: "bad_request", detail: shape.detail }, answers: [], caller: -1 };
    const caller = callerOf(line, this.options);
    const callerKey = caller.reportKey === null ? -1 : this.keys.of(caller.reportKey);
    const facts = {
      methods: shape.methods,
      paths: shape.paths,
      foldCase: !this.options.settings.path.caseSensitive,
      ...caller.facts,
      values: lineSource(line),
    };
    const denied = denyingRules(this.denies, facts).find((d) => d.rule.mode === "enforce");
    if (denied !== undefined) {
      const verdict = { kind: "forbidden", rule: denied.rule.id, status: denied.rule.status } as const;
      return { verdict, answers: [], caller: callerKey };
    }
    const rejecting = rejectingRule(this.compiled, facts);
    if (rejecting !== null) {
      return { verdict: { kind: "unauthorized", rule: this.placeOf(rejecting) }, answers: [], caller: callerKey };
    }
    const keyed = this.hasKeys ? lineKeys(this.compiled, facts, line, this.options.settings) : null;
    if (keyed !== null && "refused" in keyed) {
      return { verdict: { kind: "bad_request", detail: keyed.refused }, answers: [], caller: callerKey };
    }
    const apps = applicableRules(this.compiled, keyed === null ? facts : { ...facts, keyed: keyed.keyed });
    return { ...this.decideAll(apps, line, caller), caller: callerKey };
  }

  /** Ask every applicable rule (after the capacity check), compose, refund. */
  private decideAll(apps: Applicable[], line: RequestLine, caller: Caller): Omit<Replayed, "caller"> {
    const answers: RuleAnswer[] = [];
    for (const app of apps) {
      const cost = line.cost ?? app.cost;
      if (cost <= app.compiled.capacity) continue;
      if (app.compiled.rule.mode === "enforce") {
        return { verdict: { kind: "too_costly", rule: this.placeOf(app.compiled) }, answers };
      }
    }
    for (const app of apps) {
      const cost = line.cost ?? app.cost;
      const i = this.placeOf(app.compiled);
      const key = this.keys.of(app.keyHash);
      if (caller.overridden.has(app.compiled.rule.id)) this.overridden[i]!.set(key, app.compiled.params);
      const answer = this.pool[i]!;
      this.ask(answer, key, cost, line.tMs);
      if (answer.decision !== null) answers.push(answer);
    }
    const composition = compose(
      answers.map((a) => ({
        mode: this.rules[a.rule]!.mode,
        kind: "decided" as const,
        decision: a.decision!,
      })),
    );
    for (const index of composition.refund) this.giveBack(answers[index]!, line.tMs);
    const { verdict } = composition;
    if (verdict.kind === "admit") {
      const outcome = line.outcome ?? null;
      for (const a of answers) this.outcomes.answered(a.rule, a.key, a.cost, line.tMs, outcome, a.slot ?? undefined);
      return { verdict: verdict.delayMs === 0 ? ADMIT : verdict, answers };
    }
    if (verdict.kind === "deny") return { verdict: this.denial(verdict.denying.map((d) => answers[d]!)), answers };
    // A replayed rule never fails, so nothing fails closed.
    return { verdict: ADMIT, answers };
  }

  private ask(answer: RuleAnswer, key: number, cost: number, tMs: number): void {
    if (this.outcomes.handles(answer.rule)) {
      const outcomes = this.outcomes;
      const watched = this.isWatched(key);
      answer.before = watched ? outcomes.stateOf(answer.rule, key) : null;
      answer.decision = outcomes.ask(answer.rule, key, cost, tMs);
      answer.key = key;
      answer.cost = cost;
      answer.refunded = false;
      answer.slot = outcomes.askedSlot;
      answer.after = watched ? outcomes.stateOf(answer.rule, key) : null;
      return;
    }
    const states = this.states[answer.rule]!;
    const watched = this.isWatched(key);
    answer.key = key;
    answer.cost = cost;
    answer.refunded = false;
    answer.before = watched ? states.get(key) : null;
    answer.decision = states.decide(key, cost, tMs, this.latestMs);
    answer.after = watched ? states.get(key) : null;
    answer.slot = this.holdsSlots[answer.rule] && answer.decision?.allowed === true ? states.lastSlot(key) : null;
  }

  /** Give back a slot when its request's response ended, or renew it meanwhile (outcomes.ts queues both). */
  private readonly releaseSlot = (rule: number, key: number, slot: number, atMs: number, renew: boolean): void => {
    if (renew) this.states[rule]!.renew(key, slot, atMs);
    else this.states[rule]!.release(key, slot, atMs);
  };

  private giveBack(answer: RuleAnswer, tMs: number): void {
    if (this.outcomes.handles(answer.rule)) {
      this.outcomes.giveBack(answer.rule, answer.key, answer.cost, tMs, tMs);
      if (this.isWatched(answer.key)) answer.after = this.outcomes.stateOf(answer.rule, answer.key);
      answer.refunded = true;
      return;
    }
    if (answer.decision === null) return;
    const states = this.states[answer.rule]!;
    states.refund(answer.key, answer.cost, tMs);
    if (this.isWatched(answer.key)) answer.after = states.get(answer.key);
    answer.refunded = true;
  }

  private denial(denying: readonly RuleAnswer[]): Verdict {
    let longest = denying[0]!;
    for (const a of denying) {
      if ((a.decision!.retryAfterMs ?? 0) > (longest.decision!.retryAfterMs ?? 0)) longest = a;
    }
    return { kind: "deny", rules: denying.map((a) => a.rule), status: this.rules[longest.rule]!.status };
  }

  private placeOf(compiled: CompiledRule): number {
    return this.place.get(compiled.rule.id)!;
  }

  /** States held now, over every rule (for memory reports). */
  get liveStates(): number {
    return this.states.reduce((n, s) => n + s.size, 0);
  }

  /** Bytes of the packed states and the key index (objects not counted; for memory reports). */
  get packedBytes(): number {
    return this.states.reduce((n, s) => n + s.packedBytes, this.keys.byteSize);
  }
}

export type { Account };
