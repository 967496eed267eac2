/**
 * The fields every rule has, one entry each: its rule-file key, its key in the resolved rule, its default, how it is
 * read and checked, how it prints in rule-file terms, and the first sentence of its row in docs/rules.md. The parser
 * (parse.ts) walks this table, then the checks across fields; `sluice plan` and the admin API print with it, and the
 * docs test holds docs/rules.md to it. An algorithm's own parameters are in the algorithm table (src/algorithms).
 * docs/adding-a-field.md says how to add a field.
 */

import { type AlgorithmName, type AlgorithmParams, slotPolicy } from "../algorithms/index.ts";
import { formatDurationUnit } from "./duration.ts";
import { clientChosenWarning, KEY_MISSING, printKey, readKey } from "./key.ts";
import { printLease, readLease } from "./lease.ts";
import { CONDITION_SOURCES, printCondition } from "./match_conditions.ts";
import {
  printBlockFor,
  printCostHeader,
  printCountWhen,
  readBlockFor,
  readCostHeader,
  readCountWhen,
} from "./outcome.ts";
import { describe, type Raw } from "./raw.ts";
import { exceedsCapacity, nonNegativeInt, oneOf, positiveInt, type RuleErrors } from "./read.ts";
import { compileRoute } from "./route.ts";
import { DEFAULT_TIMEOUT_MS, type RoutePattern, type RuleCommon } from "./types.ts";

/** What a field's reader may consult besides its own value. */
export interface FieldContext {
  readonly e: RuleErrors;
  /** The rule's algorithm, when it resolved. */
  readonly algorithm: AlgorithmName | null;
  /** The rule's capacity and what it is called (`burst`), when the algorithm's parameters resolved. */
  readonly capacity: number | null;
  /** The rule's algorithm parameters, when they resolved (a lease's ttl is checked against a window). */
  readonly params?: AlgorithmParams | null;
  readonly capacityName: string;
  /** The fields read before this one, in table order (`undefined`: absent from the table or invalid). */
  readonly earlier: Partial<RuleCommon>;
}

/** The resolved keys the table covers: every common field but the rule's id, its file and its match. */
export type FieldKey = Exclude<keyof RuleCommon, "id" | "file" | "match">;

export interface RuleField<K extends FieldKey> {
  /** The key in a rule file: `on_error`. */
  readonly yaml: string;
  /** The key in the resolved rule: `onError`. */
  readonly resolved: K;
  /** The value when the rule file leaves the field out. */
  readonly fallback: RuleCommon[K];
  /** The value from the rule file, or `undefined` when it is invalid (the reason is reported through `cx.e`). */
  readonly read: (value: Raw | undefined, cx: FieldContext) => RuleCommon[K] | undefined;
  /** The resolved value in rule-file terms, `none` for an empty one (`sluice plan`, the admin API's rules). */
  readonly print: (value: RuleCommon[K]) => string;
  /** The first sentence of the field's row in docs/rules.md. */
  readonly doc: string;
}

export type AnyRuleField = { [K in FieldKey]: RuleField<K> }[FieldKey];

const text = (value: string | number) => String(value);

/**
 * The common fields, keyed by resolved key (so the compiler holds the table to `RuleCommon`: every field once), in
 * the order they are read and their errors reported.
 */
const TABLE: { readonly [K in FieldKey]: Omit<RuleField<K>, "resolved"> } = {
  cost: {
    yaml: "cost",
    fallback: 1,
    read: (v, cx) => {
      const cost = positiveInt(cx.e, "cost", v);
      if (cost !== undefined && cx.capacity !== null && cost > cx.capacity) {
        cx.e.add("cost", exceedsCapacity(cost, cx.capacity, cx.capacityName));
      }
      return cost;
    },
    print: text,
    doc: "What a request spends when no `cost_by_route` entry matches.",
  },
  costByRoute: {
    yaml: "cost_by_route",
    fallback: [],
    read: readCostByRoute,
    print: (list) => (list.length === 0 ? "none" : list.map((c) => `${c.route.source}: ${c.cost}`).join(", ")),
    doc: "Per-route costs; the first matching entry wins.",
  },
  mode: {
    yaml: "mode",
    fallback: "enforce",
    read: (v, cx) => oneOf(cx.e, "mode", v, ["enforce", "shadow"]),
    print: text,
    doc: "Shadow rules never block; see [Shadow mode](#shadow-mode).",
  },
  scope: {
    yaml: "scope",
    fallback: "global",
    read: (v, cx) => {
      const scope = oneOf(cx.e, "scope", v, ["global", "local"]);
      // A slot is given back by whichever isolate's request ends; only the key's object sees every one.
      if (scope === "local" && cx.algorithm !== null && slotPolicy({ algorithm: cx.algorithm }) !== undefined) {
        cx.e.add("scope", `must be global for ${cx.algorithm}: its slots are counted by the key's object`);
        return undefined;
      }
      return scope;
    },
    print: text,
    doc: "Where the state lives; see [Scope](#scope).",
  },
  onError: {
    yaml: "on_error",
    fallback: "open",
    read: (v, cx) => oneOf(cx.e, "on_error", v, ["open", "closed"]),
    print: text,
    doc: "When the limiter errors or is reset: forward (`open`) or answer 503 (`closed`). A busy (overloaded, late) one: 429.",
  },
  timeoutMs: {
    yaml: "timeout_ms",
    fallback: DEFAULT_TIMEOUT_MS,
    read: (v, cx) => positiveInt(cx.e, "timeout_ms", v),
    print: text,
    doc: "How long to wait for this rule's decision; a key not known busy waits for a late answer (its call sent again at 1.5x), at most 2.5x; later: refused (429), never `on_error`.",
  },
  status: {
    yaml: "status",
    fallback: 429,
    read: (v, cx) => {
      if (typeof v === "bigint" && v >= 400n && v <= 599n) return Number(v);
      cx.e.add("status", `must be an HTTP status from 400 to 599, got ${describe(v)}`);
      return undefined;
    },
    print: text,
    doc: "The status of a denial by this rule.",
  },
  retryJitterS: {
    yaml: "retry_jitter_s",
    fallback: 0,
    read: (v, cx) => nonNegativeInt(cx.e, "retry_jitter_s", v),
    print: text,
    doc: "Up to this many whole seconds added to `Retry-After`, fixed per client, so denied clients do not all come back at once.",
  },
  lease: {
    yaml: "lease",
    fallback: null,
    read: (v, cx) => readLease(v, cx.e, cx.algorithm, cx.earlier.scope, cx.capacity, cx.params ?? null),
    print: printLease,
    doc: "Let isolates hold a slice of a hot key's budget",
  },
  unverified: {
    yaml: "unverified",
    fallback: "by_address",
    read: (v, cx) => oneOf(cx.e, "unverified", v, ["by_address", "skip", "reject"]),
    print: text,
    doc: "`identity: api_key` rules only: a caller without a known key is counted by its address, skipped, or refused with 401",
  },
  description: {
    yaml: "description",
    fallback: "",
    read: (v, cx) => {
      if (typeof v === "string" && v.length <= MAX_DESCRIPTION && !/[\n\r]/.test(v)) return v;
      cx.e.add(
        "description",
        `must be one line of text, at most ${MAX_DESCRIPTION} characters, got ${describeText(v)}`,
      );
      return undefined;
    },
    print: (v) => (v === "" ? "none" : v),
    doc: "What the rule is for, in a line, for people: the dashboard shows it, `sluice plan` reports a change.",
  },
  // Keys (issue 33; src/rules/key.ts): key, key_missing, key_client_chosen.
  key: {
    yaml: "key",
    fallback: null,
    read: (v, cx) => readKey(v, cx.e),
    print: printKey,
    doc: "Whose budget a request spends, as a list of parts (instead of `match.identity`)",
  },
  keyMissing: {
    yaml: "key_missing",
    fallback: "empty",
    read: (v, cx) => oneOf(cx.e, "key_missing", v, KEY_MISSING),
    print: text,
    doc: "`key:` rules only: what a request without a value for a part gets",
  },
  keyClientChosen: {
    yaml: "key_client_chosen",
    fallback: "warn",
    read: (v, cx) => (v === "accept" ? "accept" : oneOf(cx.e, "key_client_chosen", v, ["accept"])),
    print: text,
    doc: "`key:` rules only: `accept` says a key the client can rotate is meant",
  },
  // Counting by the response and bans (issue 34; src/rules/outcome.ts): count_when, cost_header, block_for.
  countWhen: {
    yaml: "count_when",
    fallback: null,
    read: readCountWhen,
    print: printCountWhen,
    doc: "Count only the requests whose response matches: checked before forwarding, charged after the origin answers.",
  },
  costHeader: {
    yaml: "cost_header",
    fallback: null,
    read: readCostHeader,
    print: printCostHeader,
    doc: "Charge what the origin says a request cost, from this response header, after it answers.",
  },
  blockForMs: {
    yaml: "block_for",
    fallback: null,
    read: readBlockFor,
    print: printBlockFor,
    doc: "Once the rule refuses a caller, it stays refused this long, everywhere.",
  },
};

/** The table as a list, each entry with its resolved key. */
export const RULE_FIELDS = Object.entries(TABLE).map(([resolved, f]) => ({ ...f, resolved })) as AnyRuleField[];

/** The longest `description`: a line on the dashboard, not documentation. */
const MAX_DESCRIPTION = 200;

/** A rejected description as a message shows it: long text by its length, not in full. */
function describeText(v: Raw | undefined): string {
  return typeof v === "string" && v.length > 40
    ? `${v.length} characters${/[\n\r]/.test(v) ? " over several lines" : ""}`
    : describe(v);
}

/**
 * Checks across fields, after every field was read: each gets the rule as far as it resolved and whether the rule
 * file gave each key.
 */
export const CROSS_FIELD_CHECKS: readonly ((
  rule: Partial<RuleCommon>,
  given: (yaml: string) => boolean,
  e: RuleErrors,
) => void)[] = [
  (rule, given, e) => {
    const identity = rule.match?.identity;
    const keyed = rule.key?.some((p) => p.kind === "api_key") === true;
    if (given("unverified") && identity !== undefined && identity !== "api_key" && !keyed) {
      e.add(
        "unverified",
        identity === null
          ? "only rules whose key has an api_key part have unverified callers; this key has none"
          : `only rules with identity: api_key have unverified callers; this one has identity: ${identity}`,
      );
    }
  },
  (rule, given, e) => {
    for (const yaml of ["key_missing", "key_client_chosen"]) {
      if (given(yaml) && !given("key")) {
        e.add(yaml, "only rules with key: take it (a match.identity rule skips a request without its identity)");
      }
    }
    if (rule.key !== undefined && rule.key !== null && rule.keyClientChosen !== "accept") {
      const warning = clientChosenWarning(rule.key);
      if (warning !== null) e.warn("key", warning);
    }
  },
];

/** `cost_by_route`: routes and their costs, each no more than the rule's capacity. */
function readCostByRoute(m: Raw | undefined, cx: FieldContext): RuleCommon["costByRoute"] | undefined {
  const { e, capacity, capacityName } = cx;
  if (!(m instanceof Map)) {
    e.add("cost_by_route", `must be a mapping of "METHOD /path" to a cost, got ${describe(m)}`);
    return undefined;
  }
  const out: { route: RoutePattern; cost: number }[] = [];
  let ok = true;
  for (const [source, v] of m) {
    const name = `cost_by_route[${JSON.stringify(source)}]`;
    const route = compileRoute(source);
    if ("error" in route) {
      e.add(name, route.error);
      ok = false;
    }
    const cost = positiveInt(e, name, v);
    if (cost !== undefined && capacity !== null && cost > capacity) {
      e.add(name, exceedsCapacity(cost, capacity, capacityName));
      ok = false;
    }
    if ("error" in route || cost === undefined) ok = false;
    else out.push({ route, cost });
  }
  return ok ? out : undefined;
}

/** The keys of `match`, in rule-file terms, with how each prints (`any`: the rule applies to every value). */
export const MATCH_FIELDS = [
  { yaml: "plan", print: (m: RuleCommon["match"]) => (m.plans === null ? "any" : m.plans.join(", ")) },
  {
    yaml: "route",
    print: (m: RuleCommon["match"]) =>
      m.route === null ? "any" : [m.route, ...m.moreRoutes].map((r) => r.source).join(", "),
  },
  {
    yaml: "except",
    print: (m: RuleCommon["match"]) => (m.except.length === 0 ? "none" : m.except.map((r) => r.source).join(", ")),
  },
  ...CONDITION_SOURCES.map((source) => ({
    yaml: source,
    print: (m: RuleCommon["match"]) => {
      const mine = (m.conditions ?? []).filter((c) => c.in === source);
      return mine.length === 0 ? "any" : mine.map(printCondition).join(", ");
    },
  })),
  {
    yaml: "address",
    print: (m: RuleCommon["match"]) => m.addresses?.map((r) => r.source).join(", ") ?? "any",
  },
  {
    yaml: "except_address",
    print: (m: RuleCommon["match"]) => m.exceptAddresses?.map((r) => r.source).join(", ") ?? "none",
  },
  { yaml: "identity", print: (m: RuleCommon["match"]) => m.identity ?? "none (key)" },
] as const;

/**
 * A rule in rule-file terms, field by field: `match.plan`, the algorithm's parameters, then the table's fields (the
 * file a rule lives in and its id are not fields of it). The algorithm's parameters print by their kind: a rate as
 * `10/s`, a window as `min` or `month`, a duration in ms (`windowMs`) under its rule-file name (`window`).
 */
export function printRule(rule: RuleCommon & { readonly algorithm: string }): [field: string, value: string][] {
  const out: [string, string][] = MATCH_FIELDS.map((m) => [`match.${m.yaml}`, m.print(rule.match)]);
  out.push(["algorithm", rule.algorithm]);
  const common = new Set<string>(["id", "file", "match", "algorithm", ...RULE_FIELDS.map((f) => f.resolved)]);
  for (const [key, value] of Object.entries(rule)) {
    if (!common.has(key)) out.push(printParam(key, value));
  }
  for (const f of RULE_FIELDS) out.push([f.yaml, (f.print as (v: unknown) => string)(rule[f.resolved])]);
  return out;
}

function printParam(key: string, value: unknown): [string, string] {
  const name = key.replace(/Ms$/, "").replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  if (key.endsWith("Ms") && typeof value === "number") return [name, formatDurationUnit(value)];
  if (typeof value === "object" && value !== null && "amount" in value && "periodMs" in value) {
    const rate = value as { amount: number; periodMs: number };
    return [name, `${rate.amount}/${formatDurationUnit(rate.periodMs)}`];
  }
  if (typeof value === "object" && value !== null && "kind" in value) {
    const w = value as { kind: "ms"; ms: number } | { kind: "month" };
    return [name, w.kind === "month" ? "month" : formatDurationUnit(w.ms)];
  }
  return [name, typeof value === "string" ? value : JSON.stringify(value)];
}
