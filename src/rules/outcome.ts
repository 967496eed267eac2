/**
 * Rules that count by the response (`count_when`, `cost_header`) and hold a refused caller out (`block_for`): how the
 * three fields are read and printed (their entries in fields.ts), and what a response is charged (`chargeOf`), the
 * one place the gateway, the service binding and the replay engine ask.
 *
 * A rule with `count_when` or `cost_header` is *deferred*: before forwarding it is checked without charging (a probe:
 * admitted iff the request's cost would fit now, the key's state untouched), and the origin's answer is charged after
 * it (src/protocol/record.ts `chargeRecord`). docs/rules.md, "Counting by the response", says the guarantees.
 */
import { type AlgorithmParams, denialsCount } from "../algorithms/index.ts";
import { formatDurationUnit, parseDuration } from "./duration.ts";
import { describe, type Raw } from "./raw.ts";
import type { RuleErrors } from "./read.ts";
import type { CountWhen, RuleCommon, StatusMatch } from "./types.ts";

/** What the readers consult (a part of fields.ts's `FieldContext`). */
interface FieldContext {
  readonly e: RuleErrors;
  readonly params?: AlgorithmParams | null;
  readonly earlier: Partial<Pick<RuleCommon, "scope" | "lease">>;
}

/** A header field name (RFC 9110 `token`). */
const HEADER_NAME_RE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
const STATUS_CLASS_RE = /^[1-5]xx$/;

/** Whether the rule charges after the origin answers (`count_when` or `cost_header`): checked by a probe before. */
export function isDeferred(rule: Pick<RuleCommon, "countWhen" | "costHeader">): boolean {
  return rule.countWhen !== null || rule.costHeader !== null;
}

/** Whether the rule needs its key's object on every request (a deferred rule, or one with `block_for`). */
export function needsObject(rule: Pick<RuleCommon, "countWhen" | "costHeader" | "blockForMs">): boolean {
  return isDeferred(rule) || rule.blockForMs !== null;
}

/** The checks every one of the three fields shares: where the state must live, and what it cannot be mixed with. */
function sharedChecks(yaml: string, cx: FieldContext, deferred: boolean): boolean {
  let ok = true;
  if (cx.earlier.scope === "local") {
    cx.e.add(
      yaml,
      "needs scope: global (the key's Durable Object counts responses and holds bans); this rule is scope: local",
    );
    ok = false;
  }
  if (cx.earlier.lease != null) {
    cx.e.add(
      yaml,
      "cannot be used with lease (an isolate admitting from a lease would not see a ban or a late charge)",
    );
    ok = false;
  }
  // A shaping algorithm (one with `delay`) places each request in its queue as it arrives.
  if (deferred && cx.params != null && "delay" in cx.params) {
    cx.e.add(yaml, "this algorithm shapes requests before they go on; it cannot charge them after the origin answers");
    ok = false;
  }
  if (deferred && cx.params != null && denialsCount(cx.params)) {
    cx.e.add(yaml, "cannot be used with count_denied: true (a refused request has no response to count)");
    ok = false;
  }
  return ok;
}

/** `count_when: { status: 401 | [401, 403] | 5xx, header: X-Name }`. */
export function readCountWhen(v: Raw | undefined, cx: FieldContext): CountWhen | undefined {
  const field = "count_when";
  if (!(v instanceof Map) || v.size === 0) {
    cx.e.add(
      field,
      `must be a mapping such as { status: [401, 403] }, { status: 5xx } or { header: X-Name }, got ${describe(v)}`,
    );
    return undefined;
  }
  let ok = sharedChecks(field, cx, true);
  let status: StatusMatch[] | null = null;
  let header: string | null = null;
  for (const [key, value] of v) {
    if (key === "status") {
      status = readStatuses(value, cx);
      if (status === null) ok = false;
    } else if (key === "header") {
      header = readHeaderName(`${field}.header`, value, cx);
      if (header === null) ok = false;
    } else {
      cx.e.add(`${field}.${key}`, "unknown key (count_when takes status and header)");
      ok = false;
    }
  }
  return ok ? { status, header } : undefined;
}

function readStatuses(v: Raw, cx: FieldContext): StatusMatch[] | null {
  const list = Array.isArray(v) ? v : [v];
  const out: StatusMatch[] = [];
  for (const item of list) {
    if (typeof item === "bigint" && item >= 100n && item <= 599n) out.push(Number(item));
    else if (typeof item === "string" && STATUS_CLASS_RE.test(item)) out.push(item as StatusMatch);
    else {
      cx.e.add(
        "count_when.status",
        `must be an HTTP status (100 to 599), a class such as 5xx, or a non-empty list of them, got ${describe(item)}`,
      );
      return null;
    }
  }
  if (out.length === 0) {
    cx.e.add("count_when.status", "must not be an empty list");
    return null;
  }
  return out;
}

function readHeaderName(field: string, v: Raw | undefined, cx: FieldContext): string | null {
  if (typeof v === "string" && HEADER_NAME_RE.test(v)) return v;
  cx.e.add(field, `must be a response header name such as X-Cost, got ${describe(v)}`);
  return null;
}

/** `cost_header: X-Query-Cost`. */
export function readCostHeader(v: Raw | undefined, cx: FieldContext): string | undefined {
  const ok = sharedChecks("cost_header", cx, true);
  const name = readHeaderName("cost_header", v, cx);
  return ok && name !== null ? name : undefined;
}

/** `block_for: 10min`. */
export function readBlockFor(v: Raw | undefined, cx: FieldContext): number | undefined {
  const ok = sharedChecks("block_for", cx, false);
  if (typeof v !== "string") {
    cx.e.add("block_for", `must be a duration such as 30s, 10min or h, got ${describe(v)}`);
    return undefined;
  }
  const d = parseDuration(v);
  if ("error" in d) {
    cx.e.add("block_for", d.error);
    return undefined;
  }
  return ok ? d.ms : undefined;
}

export function printCountWhen(c: CountWhen | null): string {
  if (c === null) return "none";
  const parts: string[] = [];
  if (c.status !== null) parts.push(`status ${c.status.join(", ")}`);
  if (c.header !== null) parts.push(`header ${c.header}`);
  return parts.join("; ");
}

export const printCostHeader = (h: string | null): string => h ?? "none";
export const printBlockFor = (ms: number | null): string => (ms === null ? "none" : formatDurationUnit(ms));

/** What the origin answered, as a charge needs it: the status and a header lookup (`null`: absent). */
export interface ResponseFacts {
  readonly status: number;
  readonly header: (name: string) => string | null;
}

/** Whether a response matches `count_when` (every part given holds). */
export function countsResponse(when: CountWhen, response: ResponseFacts): boolean {
  if (when.status !== null && !anyStatusMatches(when.status, response.status)) return false;
  if (when.header !== null && response.header(when.header) === null) return false;
  return true;
}

/** `statuses.some(...)` without a closure per response (the replay asks this for every admitted request). */
function anyStatusMatches(statuses: readonly StatusMatch[], status: number): boolean {
  for (const s of statuses) if (statusMatches(s, status)) return true;
  return false;
}

function statusMatches(s: StatusMatch, status: number): boolean {
  return typeof s === "number" ? s === status : Math.floor(status / 100) === Number(s[0]);
}

/** What a response is charged, and why a `cost_header` value was not used (`bad`, for the log). */
export interface Charge {
  /** Units to charge, 0 to the rule's capacity (0: nothing). */
  readonly cost: number;
  /** The header's value when it was not a whole number from 0 to the capacity (then `cost` is the default). */
  readonly bad: string | null;
}

/**
 * The charge for a response of a deferred rule: nothing when `count_when` does not match; else the `cost_header`
 * value when it is a whole number from 0 to `capacity`; else (no such header, or no header given, or a bad value,
 * which is reported in `bad`) `defaultCost`, the request's cost as the rule prices it.
 */
export function chargeOf(
  rule: Pick<RuleCommon, "countWhen" | "costHeader">,
  response: ResponseFacts,
  defaultCost: number,
  capacity: number,
): Charge {
  if (rule.countWhen !== null && !countsResponse(rule.countWhen, response)) return { cost: 0, bad: null };
  if (rule.costHeader === null) return { cost: defaultCost, bad: null };
  const raw = response.header(rule.costHeader);
  if (raw === null) return { cost: defaultCost, bad: null };
  const text = raw.trim();
  const n = /^[0-9]{1,16}$/.test(text) ? Number(text) : Number.NaN;
  if (Number.isSafeInteger(n) && n <= capacity) return { cost: n, bad: null };
  return { cost: defaultCost, bad: raw.slice(0, 40) };
}
