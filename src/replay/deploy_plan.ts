/**
 * The pure half of `sluice plan`: what changes between two rule sets, what a deploy does to each rule's live state
 * (asked of the core's `carryOver`, never re-derived), and a streaming replay of a trace under both sets that counts
 * the requests whose answer flips. Data in, data out; the command reads files and git, and writes the results.
 */
import { type AlgorithmState, capacityOf, carryOver, decide } from "../algorithms/index.ts";
import { printRule } from "../rules/fields.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { describeRule } from "./run.ts";

/** One rule id across the two sets. */
export interface RulePair {
  readonly id: string;
  readonly before: ResolvedRule | null;
  readonly after: ResolvedRule | null;
}

export type Change = "added" | "removed" | "changed" | "unchanged";

export interface FieldChange {
  /** In rule-file terms: `burst`, `rate`, `match.route`, `on_error`. */
  readonly field: string;
  readonly before: string;
  readonly after: string;
}

/** The rules of both sets by id: first the `before` order, then rules only in `after`. */
export function pairRules(before: readonly ResolvedRule[], after: readonly ResolvedRule[]): RulePair[] {
  const next = new Map(after.map((r) => [r.id, r]));
  const pairs: RulePair[] = before.map((r) => ({ id: r.id, before: r, after: next.get(r.id) ?? null }));
  const seen = new Set(before.map((r) => r.id));
  for (const r of after) if (!seen.has(r.id)) pairs.push({ id: r.id, before: null, after: r });
  return pairs;
}

export function changeOf(pair: RulePair): Change {
  if (pair.before === null) return "added";
  if (pair.after === null) return "removed";
  return fieldChanges(pair.before, pair.after).length === 0 ? "unchanged" : "changed";
}

/** Every field whose value differs, in rule-file terms (the rule field table's printing, src/rules/fields.ts). */
export function fieldChanges(before: ResolvedRule, after: ResolvedRule): FieldChange[] {
  const a = new Map(printRule(before));
  const b = new Map(printRule(after));
  const out: FieldChange[] = [];
  for (const field of new Set([...a.keys(), ...b.keys()])) {
    const x = a.get(field) ?? "none";
    const y = b.get(field) ?? "none";
    if (x !== y) out.push({ field, before: x, after: y });
  }
  return out;
}

/** What a deploy does to the live state of a rule's keys. */
export interface StateFate {
  readonly kind: "none" | "dropped" | "kept" | "converted" | "capped" | "discarded";
  readonly text: string;
  /**
   * Cost-1 requests a key that had spent its whole capacity just before the deploy may make at once just after it,
   * under the new rule (`null` when the rule was removed or cannot be probed): the claim a test checks against the
   * Worker.
   */
  readonly atLimitAdmits: number | null;
}

/** The probe time: window algorithms are epoch-aligned, so a window's start is as good as any moment. */
const PROBE_MS = 0;

/** How many cost-1 requests `state` admits at `PROBE_MS` (the decision's `remaining`, plus the one asked). */
function headroom(rule: ResolvedRule, state: AlgorithmState | null): number {
  const r = decide(rule, state, 1, PROBE_MS);
  return r.ok && r.decision.allowed ? r.decision.remaining + 1 : 0;
}

/**
 * The fate of live state on deploy, found by asking the core: two probe keys are made under the old rule (one
 * that made a single request, one that spent its whole capacity at once), `carryOver` converts them, and the new
 * rule says how many requests each may still make.
 */
export function stateFate(pair: RulePair): StateFate {
  const { before, after } = pair;
  if (before === null) {
    return { kind: "none", text: "new rule: every key starts fresh", atLimitAdmits: after && headroom(after, null) };
  }
  if (after === null)
    return { kind: "dropped", text: "rule removed: its state is no longer read", atLimitAdmits: null };
  const fresh = (why: string): StateFate => {
    const admits = headroom(after, null);
    return {
      kind: "discarded",
      text: `discarded: every key starts fresh (${admits} requests at once): ${why}`,
      atLimitAdmits: admits,
    };
  };
  const unread = unreadState(before, after);
  if (unread !== null) return fresh(unread);
  const light = decide(before, null, 1, PROBE_MS);
  const full = decide(before, null, capacityOf(before), PROBE_MS);
  if (!light.ok || !full.ok) return { kind: "discarded", text: "cannot probe", atLimitAdmits: null };
  const lightNext = carryOver(before, after, light.state, PROBE_MS);
  if (lightNext === null) {
    return fresh(
      before.algorithm === after.algorithm
        ? "the old state means nothing under the new window"
        : `another algorithm (${before.algorithm} -> ${after.algorithm})`,
    );
  }
  const fullNext = carryOver(before, after, full.state, PROBE_MS);
  const was = headroom(before, light.state);
  const keeps = headroom(after, lightNext);
  const atLimit = fullNext === null ? headroom(after, null) : headroom(after, fullNext);
  const detail = `a key with ${was} left keeps ${keeps}; a key at its limit keeps ${atLimit}`;
  // A change of match keeps the key and its object: it changes which requests count, not what they counted.
  const matchChanged =
    JSON.stringify(before.match.plans) !== JSON.stringify(after.match.plans) ||
    before.match.route?.source !== after.match.route?.source;
  const matchNote = matchChanged ? " (a match change keeps each key's state: it changes which requests count)" : "";
  const fate = (kind: StateFate["kind"], text: string): StateFate => ({
    kind,
    text: `${text}${matchNote}`,
    atLimitAdmits: atLimit,
  });
  if (lightNext === light.state) {
    // The same state, judged by the new rule (e.g. a window's count under a new limit).
    if (keeps === was && atLimit === headroom(before, full.state)) return fate("kept", "carried over as it is");
    return fate(keeps < was ? "capped" : "kept", `carried over as it is, judged by the new rule: ${detail}`);
  }
  return keeps < was ? fate("capped", `carried over, capped: ${detail}`) : fate("converted", `carried over: ${detail}`);
}

/**
 * Why the Worker will not read a key's old state under the new rule at all, or `null` when it will (and carryOver
 * decides). State is found by the key's Durable Object name (rule id and the hash of the identity value) for
 * `scope: global`, and in an isolate's memory for `scope: local`.
 */
function unreadState(before: ResolvedRule, after: ResolvedRule): string | null {
  if (before.match.identity !== after.match.identity) {
    return (
      `keys are counted by ${after.match.identity} instead of ${before.match.identity}, so every caller has a new ` +
      "key and the old keys' state is never read"
    );
  }
  if (before.scope === "global" && after.scope === "local") {
    return "scope: local keeps keys in each isolate's memory, so the Durable Objects' state is no longer read (and each isolate counts alone)";
  }
  if (before.scope === "local" && after.scope === "global") {
    return "scope: local state lived in isolate memory, which is not moved into the keys' Durable Objects";
  }
  if (before.scope === "local")
    return "scope: local state lives in isolate memory, and a deploy starts every isolate afresh";
  return null;
}

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

/** A replayed rule: its pair, its flips in total and over time. */
export interface ReplayLane {
  readonly pair: RulePair;
  readonly flips: Flips;
  readonly histogram: FlipHistogram;
}

export interface KeyFlips extends Flips {
  readonly key: string;
}

export interface Replay {
  readonly lanes: readonly ReplayLane[];
  readonly requests: number;
  readonly keys: number;
  readonly firstMs: number | null;
  readonly lastMs: number | null;
  /** The keys with the most flips, most first (first seen on a tie). */
  readonly topKeys: readonly KeyFlips[];
}

/** Per key: both sets' state for each replayed rule, and its flips. */
interface KeyRecord extends Flips {
  readonly before: (AlgorithmState | null)[];
  readonly after: (AlgorithmState | null)[];
}

/** Whether a rule lets the request through: no rule, a shadow rule, an admitted (or delayed) request. */
function answer(
  rule: ResolvedRule | null,
  states: (AlgorithmState | null)[],
  i: number,
  cost: number,
  tMs: number,
): boolean {
  if (rule === null) return true;
  const r = decide(rule, states[i] ?? null, cost, tMs);
  if (!r.ok) return rule.mode === "shadow";
  states[i] = r.state;
  return r.decision.allowed || rule.mode === "shadow";
}

/**
 * Both rule sets over one trace, streaming: each rule alone, as `compare` runs it, except that a shadow rule lets
 * everything through (it only logs). Only rules whose answers can differ are replayed (added, removed, or changed in
 * parameters or mode); memory is one record per distinct key plus a bounded histogram per rule.
 */
export class ReplayBuilder {
  readonly lanes: ReplayLane[];
  private readonly keys = new Map<string, KeyRecord>();
  private requests = 0;
  private firstMs: number | null = null;
  private lastMs: number | null = null;

  constructor(pairs: readonly RulePair[]) {
    this.lanes = pairs
      .filter(canFlip)
      .map((pair) => ({ pair, flips: { allowedToDenied: 0, deniedToAllowed: 0 }, histogram: new FlipHistogram() }));
  }

  add(tMs: number, key: string, cost: number): void {
    this.requests++;
    if (this.firstMs === null || tMs < this.firstMs) this.firstMs = tMs;
    if (this.lastMs === null || tMs > this.lastMs) this.lastMs = tMs;
    let record = this.keys.get(key);
    if (record === undefined) {
      const none = () => this.lanes.map(() => null);
      record = { before: none(), after: none(), allowedToDenied: 0, deniedToAllowed: 0 };
      this.keys.set(key, record);
    }
    for (let i = 0; i < this.lanes.length; i++) {
      const lane = this.lanes[i]!;
      const was = answer(lane.pair.before, record.before, i, cost, tMs);
      const now = answer(lane.pair.after, record.after, i, cost, tMs);
      if (was === now) continue;
      const field = was ? "allowedToDenied" : "deniedToAllowed";
      lane.flips[field]++;
      record[field]++;
      lane.histogram.add(tMs, was);
    }
  }

  finish(top: number): Replay {
    const ranked: KeyFlips[] = [];
    for (const [key, r] of this.keys) {
      const total = r.allowedToDenied + r.deniedToAllowed;
      if (total === 0) continue;
      // Keep the list at `top`: insert in order, drop the last (a stable rank: first seen wins a tie).
      let i = ranked.length;
      while (i > 0 && total > ranked[i - 1]!.allowedToDenied + ranked[i - 1]!.deniedToAllowed) i--;
      if (i >= top) continue;
      ranked.splice(i, 0, { key, allowedToDenied: r.allowedToDenied, deniedToAllowed: r.deniedToAllowed });
      if (ranked.length > top) ranked.pop();
    }
    return {
      lanes: this.lanes,
      requests: this.requests,
      keys: this.keys.size,
      firstMs: this.firstMs,
      lastMs: this.lastMs,
      topKeys: ranked,
    };
  }
}

/** Whether the two sides of a pair can answer a request differently. */
function canFlip(pair: RulePair): boolean {
  const { before, after } = pair;
  if (before === null || after === null) return true;
  if (before.mode !== after.mode) return true;
  return fieldChanges(before, after).some((c) => !NOT_REPLAYED.has(c.field));
}

/** Fields a trace of `t_ms,key,cost` cannot show: which requests a rule matches, and what they cost. */
const NOT_REPLAYED = new Set([
  "match.plan",
  "match.route",
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

export function totalFlips(replay: Replay): number {
  return replay.lanes.reduce((n, l) => n + l.flips.allowedToDenied + l.flips.deniedToAllowed, 0);
}

/** The plan as text: one block per rule (change, fields, live state), then the replay's tables. */
export function formatPlan(
  pairs: readonly RulePair[],
  fromName: string,
  toName: string,
  replay: Replay | null,
  traceName: string,
): string {
  const out: string[] = [`sluice plan: ${fromName} -> ${toName}`, ""];
  const counts = new Map<Change, number>();
  for (const pair of pairs) {
    const change = changeOf(pair);
    counts.set(change, (counts.get(change) ?? 0) + 1);
    if (change === "unchanged") continue;
    const rule = pair.after ?? pair.before!;
    out.push(`${pair.id}: ${change} (${describeRule(rule)})`);
    if (change === "changed") {
      for (const c of fieldChanges(pair.before!, pair.after!)) out.push(`  ${c.field}: ${c.before} -> ${c.after}`);
    }
    out.push(`  live state: ${stateFate(pair).text}`);
  }
  const summary = (["added", "removed", "changed", "unchanged"] as const).map((c) => `${counts.get(c) ?? 0} ${c}`);
  out.push(`${pairs.length === 0 ? "no rules" : summary.join(", ")}`, "");
  if (replay === null) return `${out.join("\n")}\n`;
  out.push(...formatReplay(replay, traceName));
  return `${out.join("\n")}\n`;
}

function formatReplay(replay: Replay, traceName: string): string[] {
  const out = [
    `replay of ${traceName}: ${plural(replay.requests, "request")}, ${plural(replay.keys, "key")}. Each rule alone, as \`sluice compare\` runs`,
    "it (a shadow rule lets everything through); changes to match, cost and cost_by_route are not replayed.",
    "",
  ];
  if (replay.lanes.length === 0) {
    out.push("no rule's answers can differ: 0 flips", "");
    return out;
  }
  out.push(
    ...table([
      ["rule", "change", "allowed->denied", "denied->allowed"],
      ...replay.lanes.map((l) => [
        l.pair.id,
        changeOf(l.pair),
        String(l.flips.allowedToDenied),
        String(l.flips.deniedToAllowed),
      ]),
      ["total", "", ...sumFlips(replay.lanes.map((l) => l.flips))],
    ]),
    "",
  );
  if (replay.topKeys.length > 0) {
    out.push(
      "most affected keys:",
      ...table(
        [
          ["key", "flips", "allowed->denied", "denied->allowed"],
          ...replay.topKeys.map((k) => [
            k.key,
            String(k.allowedToDenied + k.deniedToAllowed),
            String(k.allowedToDenied),
            String(k.deniedToAllowed),
          ]),
        ],
        1,
      ),
      "",
    );
  }
  return out;
}

function sumFlips(list: readonly Flips[]): [string, string] {
  const a = list.reduce((n, f) => n + f.allowedToDenied, 0);
  const d = list.reduce((n, f) => n + f.deniedToAllowed, 0);
  return [String(a), String(d)];
}

/** Columns padded; numbers (the columns from `firstNumber` on) right-aligned. */
function table(rows: string[][], firstNumber = 2): string[] {
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((r) => r[col]!.length)));
  return rows.map((r) =>
    r
      .map((cell, col) => (col >= firstNumber ? cell.padStart(widths[col]!) : cell.padEnd(widths[col]!)))
      .join("  ")
      .trimEnd(),
  );
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}
