/**
 * The pure half of `sluice plan`: what changes between two rule sets, what a deploy does to each rule's live state
 * (asked of the core's `carryOver`, never re-derived), and a streaming replay of a trace under both sets that counts
 * the requests whose answer flips. Data in, data out; the command reads files and git, and writes the results.
 */
import { type AlgorithmState, capacityOf, carryOver, decide } from "../algorithms/index.ts";
import { printRule } from "../rules/fields.ts";
import { printKey } from "../rules/key.ts";
import type { ResolvedRule } from "../rules/types.ts";

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
    JSON.stringify(before.match.plans) !== JSON.stringify(after.match.plans) || routesOf(before) !== routesOf(after);
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
  if (stateKeyOf(before) !== stateKeyOf(after)) {
    return (
      `keys are counted by ${keyLabelOf(after)} instead of ${keyLabelOf(before)}, so every caller has a new ` +
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

/** Whose budget a rule counts, as plan prints it: `ip` (its `match.identity`), `key ip, header:x-tenant-id`, `key global`. */
function keyLabelOf(rule: ResolvedRule): string {
  return rule.key === null ? `${rule.match.identity}` : `key ${printKey(rule.key)}`;
}

/**
 * What names a key's state: equal for two rules whose keys name the same objects. `identity: ip` and `key: [ip]` key
 * an address alike (its hash); `key: [api_key]` and `key: [user]` hash the identity's hash again (src/edge/rule_keys.ts),
 * so they are not `identity: api_key` or `identity: user`'s keys; two key lists are alike only part for part, in order.
 */
function stateKeyOf(rule: ResolvedRule): string {
  if (rule.key === null) return rule.match.identity === "ip" ? "ip" : `identity:${rule.match.identity}`;
  return printKey(rule.key);
}

/** `match.route` and `match.except` as text, to tell a change. */
function routesOf(rule: ResolvedRule): string {
  const { route, moreRoutes, except } = rule.match;
  return JSON.stringify([
    route === null ? [] : [route, ...moreRoutes].map((r) => r.source),
    except.map((r) => r.source),
  ]);
}
