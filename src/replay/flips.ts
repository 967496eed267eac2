/**
 * `sluice plan`'s replay: both rule sets over one trace, streaming, through the replay engine (engine.ts), counting
 * the requests whose answer flips (allowed -> denied, denied -> allowed), per rule, per key and over time.
 *
 * - A `t_ms,key,cost` trace: each rule alone, as `compare` runs it, except that a shadow rule lets everything through.
 *   Only rules whose answers can differ are replayed (added, removed, or changed in parameters or mode), and a rule
 *   limited to some routes or plans is not replayed at all: the trace has neither, so its answers there would be
 *   made up. The report names those rules and leaves them out of the totals.
 * - A request trace (or an access log): every request through each whole rule set as the gateway runs it; a flip is a
 *   request the gateway answers differently, attributed to the rules that denied it (after, for allowed -> denied;
 *   before, for denied -> allowed), and to its caller (API key, else user, else address).
 * Memory: the engine's packed states (states.ts) and one key index for both sides, a record per key that flipped, a
 * bounded histogram per rule.
 */
import type { DenyRule, ResolvedRule } from "../rules/types.ts";
import { fieldChanges, type RulePair } from "./deploy_plan.ts";
import { DEFAULT_REPLAY_OPTIONS, Replayer, type ReplayOptions, type Verdict } from "./engine.ts";
import { KeyIndex } from "./key_index.ts";
import type { Outcome } from "./outcomes.ts";
import type { RequestLine } from "./request_trace.ts";

/** Counts of answers that flip: allowed then denied, denied then allowed. */
export interface Flips {
  allowedToDenied: number;
  deniedToAllowed: number;
}

/** Flips of one rule per time bin, bins doubling in width past `MAX_FLIP_BINS` (bounded for any trace length). */
export const MAX_FLIP_BINS = 1024;

export class FlipHistogram {
  widthMs = 1;
  readonly bins = new Map<number, Flips>();

  add(tMs: number, toDenied: boolean): void {
    const index = Math.floor(tMs / this.widthMs);
    let bin = this.bins.get(index);
    if (bin === undefined) {
      bin = { allowedToDenied: 0, deniedToAllowed: 0 };
      this.bins.set(index, bin);
    }
    if (toDenied) bin.allowedToDenied++;
    else bin.deniedToAllowed++;
    while (this.bins.size > MAX_FLIP_BINS) this.widen();
  }

  private widen(): void {
    this.widthMs *= 2;
    const old = [...this.bins];
    this.bins.clear();
    for (const [index, f] of old) {
      const into = this.bins.get(Math.floor(index / 2));
      if (into === undefined) this.bins.set(Math.floor(index / 2), f);
      else {
        into.allowedToDenied += f.allowedToDenied;
        into.deniedToAllowed += f.deniedToAllowed;
      }
    }
  }
}

/** A rule of the plan in the replay: its pair, its flips in total and over time. */
export interface ReplayLane {
  readonly pair: RulePair;
  readonly flips: Flips;
  readonly histogram: FlipHistogram;
  /** Why the rule was not replayed (a `t_ms,key` trace cannot show its routes or plans); `null` when it was. */
  readonly notReplayed: string | null;
}

export interface KeyFlips extends Flips {
  readonly key: string;
}

export interface Replay {
  /** `keyed`: each rule alone over `t_ms,key,cost` lines; `requests`: the gateway's answers to a request trace. */
  readonly mode: "keyed" | "requests";
  readonly lanes: readonly ReplayLane[];
  readonly requests: number;
  readonly keys: number;
  readonly firstMs: number | null;
  readonly lastMs: number | null;
  /** The keys with the most flips, most first (first seen on a tie). */
  readonly topKeys: readonly KeyFlips[];
  /** Requests whose answer flips (requests mode; a request denied by two rules counts once here, in both rows). */
  readonly requestFlips: Flips;
  /** The flips each deny rule caused (requests mode), by id, in the order first seen. */
  readonly denyFlips: readonly { readonly id: string; readonly flips: Flips }[];
  /**
   * Requests whose answer before is what the log says the proxy answered (`sluice plan --from nginx:` over its access
   * log), not a replay of the rules before; their flips are blamed on the rules after only.
   */
  readonly observed: number;
}

/** Whether the proxy refused a request, as its log says; `null` when the line does not say (then the rules replay). */
export type ObservedDenial = (line: RequestLine) => boolean | null;

/** Whether an answer lets the request through: admitted, or from a shadow rule; no rule lets everything through. */
function letsThrough(rule: ResolvedRule | undefined, allowed: boolean | null): boolean {
  return rule === undefined || rule.mode === "shadow" || allowed === true;
}

/** Both rule sets over one trace, streaming (see the module comment). */
export class ReplayBuilder {
  readonly lanes: ReplayLane[];
  private readonly laneOf = new Map<string, ReplayLane>();
  private readonly keyed: { before: Replayer; after: Replayer; lanes: ReplayLane[] };
  private readonly full: { before: Replayer; after: Replayer };
  private mode: Replay["mode"] = "keyed";
  private readonly flipped = new Map<string, Flips>();
  private readonly requestFlips: Flips = { allowedToDenied: 0, deniedToAllowed: 0 };
  private readonly denyFlips = new Map<string, Flips>();
  private readonly callers = new Set<string>();
  private requests = 0;
  private observed = 0;
  private firstMs: number | null = null;
  private lastMs: number | null = null;

  constructor(
    pairs: readonly RulePair[],
    options?: ReplayOptions,
    private readonly observedDenial: ObservedDenial | null = null,
    /** Each side's deny rules: they refuse a request of a request trace before any rule is asked. */
    denies: { readonly before: readonly DenyRule[]; readonly after: readonly DenyRule[] } = { before: [], after: [] },
  ) {
    this.lanes = pairs.map((pair) => ({
      pair,
      flips: { allowedToDenied: 0, deniedToAllowed: 0 },
      histogram: new FlipHistogram(),
      notReplayed: notReplayedWhy(pair),
    }));
    for (const lane of this.lanes) this.laneOf.set(lane.pair.id, lane);
    const replayed = this.lanes.filter((l) => canFlip(l.pair) && l.notReplayed === null);
    // Both sides see the same keys: one numbering (one copy of every key) serves both.
    const keys = new KeyIndex();
    this.keyed = {
      before: new Replayer(
        replayed.flatMap((l) => (l.pair.before === null ? [] : [l.pair.before])),
        undefined,
        keys,
      ),
      after: new Replayer(
        replayed.flatMap((l) => (l.pair.after === null ? [] : [l.pair.after])),
        undefined,
        keys,
      ),
      lanes: replayed,
    };
    const side = (s: "before" | "after") => pairs.flatMap((p) => (p[s] === null ? [] : [p[s]!]));
    const withDenies = (s: "before" | "after") => ({ ...(options ?? DEFAULT_REPLAY_OPTIONS), denies: denies[s] });
    this.full = {
      before: new Replayer(side("before"), withDenies("before")),
      after: new Replayer(side("after"), withDenies("after")),
    };
  }

  /** One `t_ms,key,cost` line. */
  add(tMs: number, key: string, cost: number, outcome: Outcome | null = null): void {
    this.seen(tMs);
    const before = this.keyed.before.keyed(tMs, key, cost, outcome);
    const after = this.keyed.after.keyed(tMs, key, cost, outcome);
    let b = 0;
    let a = 0;
    for (const lane of this.keyed.lanes) {
      const was = lane.pair.before === null || letsThrough(lane.pair.before, before[b++]!.decision?.allowed ?? false);
      const now = lane.pair.after === null || letsThrough(lane.pair.after, after[a++]!.decision?.allowed ?? false);
      if (was !== now) this.flip(lane, key, tMs, was);
    }
  }

  /** One request of a request trace (or a log). */
  request(line: RequestLine): void {
    this.mode = "requests";
    this.seen(line.tMs);
    const denied = this.observedDenial?.(line) ?? null;
    if (denied !== null) this.observed++;
    const before = denied === null ? this.full.before.request(line).verdict : null;
    const after = this.full.after.request(line).verdict;
    const caller = line.key ?? line.user ?? line.address ?? "(no caller)";
    if (this.callers.size < 10_000_000) this.callers.add(caller);
    const was = before === null ? !denied : before.kind === "admit";
    if (was === (after.kind === "admit")) return;
    const field = was ? "allowedToDenied" : "deniedToAllowed";
    this.requestFlips[field]++;
    const blamed = was ? rulesOf(after, this.full.after) : before === null ? [] : rulesOf(before, this.full.before);
    for (const id of blamed) {
      const lane = this.laneOf.get(id);
      if (lane !== undefined) this.flip(lane, null, line.tMs, was);
      else countFlip(this.denyFlips, id, field); // a deny rule: no lane, no histogram
    }
    this.keyFlip(caller, field);
  }

  private flip(lane: ReplayLane, key: string | null, tMs: number, was: boolean): void {
    const field = was ? "allowedToDenied" : "deniedToAllowed";
    lane.flips[field]++;
    lane.histogram.add(tMs, was);
    if (key !== null) this.keyFlip(key, field);
  }

  private keyFlip(key: string, field: keyof Flips): void {
    countFlip(this.flipped, key, field);
  }

  private seen(tMs: number): void {
    this.requests++;
    if (this.firstMs === null || tMs < this.firstMs) this.firstMs = tMs;
    if (this.lastMs === null || tMs > this.lastMs) this.lastMs = tMs;
  }

  finish(top: number): Replay {
    const keyed = this.mode === "keyed";
    return {
      mode: this.mode,
      lanes: keyed ? this.lanes.filter((l) => canFlip(l.pair)) : this.lanes.filter((l) => total(l.flips) > 0),
      requests: this.requests,
      keys: keyed ? this.keyed.before.keys.size : this.callers.size,
      firstMs: this.firstMs,
      lastMs: this.lastMs,
      topKeys: topKeys(this.flipped, top),
      requestFlips: this.requestFlips,
      denyFlips: [...this.denyFlips].map(([id, flips]) => ({ id, flips })),
      observed: this.observed,
    };
  }
}

/** One more flip of `field` for `id` (a key, or a deny rule). */
function countFlip(map: Map<string, Flips>, id: string, field: keyof Flips): void {
  let flips = map.get(id);
  if (flips === undefined) {
    flips = { allowedToDenied: 0, deniedToAllowed: 0 };
    map.set(id, flips);
  }
  flips[field]++;
}

/** The ids of the rules behind a verdict that is not an admission. */
function rulesOf(verdict: Verdict, replayer: Replayer): string[] {
  switch (verdict.kind) {
    case "deny":
      return verdict.rules.map((i) => replayer.rules[i]!.id);
    case "unauthorized":
    case "too_costly":
      return [replayer.rules[verdict.rule]!.id];
    case "forbidden":
      return [verdict.rule];
    default:
      return [];
  }
}

const total = (f: Flips) => f.allowedToDenied + f.deniedToAllowed;

/** The `top` keys with the most flips, most first; first seen wins a tie. */
function topKeys(flipped: ReadonlyMap<string, Flips>, top: number): KeyFlips[] {
  const ranked: KeyFlips[] = [];
  for (const [key, r] of flipped) {
    const n = total(r);
    let i = ranked.length;
    while (i > 0 && n > total(ranked[i - 1]!)) i--;
    if (i >= top) continue;
    ranked.splice(i, 0, { key, ...r });
    if (ranked.length > top) ranked.pop();
  }
  return ranked;
}

/** Whether the two sides of a pair can answer a `t_ms,key` line differently. */
export function canFlip(pair: RulePair): boolean {
  const { before, after } = pair;
  if (before === null || after === null) return true;
  if (before.mode !== after.mode) return true;
  return fieldChanges(before, after).some((c) => !NOT_IN_KEYED_TRACES.has(c.field));
}

/** Fields a trace of `t_ms,key,cost` cannot show: which requests a rule matches, what they cost, how it fails. */
const NOT_IN_KEYED_TRACES = new Set([
  "match.plan",
  "match.route",
  "match.except",
  "match.identity",
  "cost",
  "cost_by_route",
  "on_error",
  "timeout_ms",
  "status",
  "retry_jitter_s",
  "scope",
  "mode",
]);

/** Why a `t_ms,key` trace cannot replay this rule: it applies only on some routes or plans. */
function notReplayedWhy(pair: RulePair): string | null {
  for (const rule of [pair.before, pair.after]) {
    if (rule === null) continue;
    if (rule.match.route !== null)
      return `only ${[rule.match.route, ...rule.match.moreRoutes].map((r) => r.source).join(", ")}`;
    if (rule.match.except.length > 0) return `not ${rule.match.except.map((r) => r.source).join(", ")}`;
    if (rule.match.plans !== null) return `only plan ${rule.match.plans.join(", ")}`;
  }
  return null;
}

export function totalFlips(replay: Replay): number {
  if (replay.mode === "requests") return total(replay.requestFlips);
  return replay.lanes.reduce((n, l) => n + (l.notReplayed === null ? total(l.flips) : 0), 0);
}
