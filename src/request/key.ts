/**
 * A `key:` rule's key for one request: each part's value read from what the request carries (src/rules/key.ts has
 * the parts), canonicalised, and joined into one text that the gateway hashes into the object's name and a replay
 * uses as is. Pure: the gateway reads a `Request` through `KeySource`, a replay a request trace line; both then call
 * `ruleKeyOf`, so they count alike.
 *
 * Canonical values: surrounding whitespace trimmed; a header, cookie or query parameter given twice with different
 * values is refused (`two_values`, 400: an upstream may read either one), given twice alike is one value; the host is
 * lower-cased without a trailing dot, the method upper-case, a country or colo code upper-case. An empty value is a
 * missing one. A missing part follows the rule's `key_missing`: `skip` (the rule does not apply), `empty` (the part
 * counts as the empty string: every such request shares one budget), `refuse` (400 naming the part).
 */

import { type KeyPart, partLabel } from "../rules/key.ts";
import { routeMatches } from "../rules/route.ts";
import type { RoutePattern } from "../rules/types.ts";
import { clientAddressKey } from "./identity.ts";
import { type CfField, type CompiledRule, cfValue, type RequestFacts, type RequestValues } from "./match.ts";

export type { CfField };

/** What a request carries, as a key reads it: its headers, cookies and query values (as conditions do), and more. */
export interface KeySource extends RequestValues {
  /** The host the request was sent to. */
  readonly host: string | null;
}

/** A rule's key for a request. */
export type RuleKey =
  | { readonly kind: "key"; readonly text: string }
  /** The rule does not apply (a part is missing under `key_missing: skip`, or an unverified caller it skips). */
  | { readonly kind: "skip" }
  /** 400: a part is missing under `key_missing: refuse`, or given twice with different values. */
  | { readonly kind: "refuse"; readonly error: "key_part_missing" | "two_values"; readonly detail: string };

export interface KeyOptions {
  /** The `IPV6_PREFIX` setting: an `ip` part without `v6` groups IPv6 addresses by it. */
  readonly ipv6PrefixBits: number;
}

type Value = string | null | { readonly two: string };

/**
 * The key of a `key:` rule (one whose `rule.key` is not null) for a request it matched. `facts.keyHashes` and
 * `facts.unverified` give the identity parts as the caller step found them (hashes at the edge, raw in a replay).
 */
export function ruleKeyOf(
  compiled: CompiledRule,
  facts: RequestFacts,
  source: KeySource,
  options: KeyOptions,
): RuleKey {
  const { rule } = compiled;
  const parts = rule.key ?? [];
  const values: string[] = [];
  for (const part of parts) {
    const v = partValue(part, compiled, facts, source, options);
    if (v === SKIP) return { kind: "skip" };
    if (v !== null && typeof v === "object") {
      return {
        kind: "refuse",
        error: "two_values",
        detail: `${v.two} is given twice with different values; send one.`,
      };
    }
    if (v !== null && v !== "") {
      values.push(v);
      continue;
    }
    if (rule.keyMissing === "skip") return { kind: "skip" };
    if (rule.keyMissing === "refuse") {
      const detail = `Rule ${rule.id} counts by ${partLabel(part)}, which this request does not carry.`;
      return { kind: "refuse", error: "key_part_missing", detail };
    }
    values.push("");
  }
  return { kind: "key", text: keyText(values) };
}

/** One value per part; a single part is its value, several are a JSON list (unambiguous whatever they hold). */
export function keyText(values: readonly string[]): string {
  return values.length === 1 ? values[0]! : JSON.stringify(values);
}

const SKIP = Symbol("skip");

function partValue(
  part: KeyPart,
  compiled: CompiledRule,
  facts: RequestFacts,
  source: KeySource,
  options: KeyOptions,
): Value | typeof SKIP {
  switch (part.kind) {
    case "api_key": {
      if (facts.unverified === null) return facts.keyHashes.api_key;
      // A caller without a verified key: as `identity: api_key` rules do (`unverified`; `reject` answered 401 first).
      return compiled.rule.unverified === "by_address" ? facts.unverified.keyHash : SKIP;
    }
    case "ip":
      return source.address === null
        ? null
        : clientAddressKey(source.address, part.v4, part.v6 ?? options.ipv6PrefixBits);
    case "user":
      return facts.keyHashes.user;
    case "header":
      return oneValue(`The ${part.name} header`, splitHeader(part.name, source.header(part.name)));
    case "cookie":
      return oneValue(`The ${part.name} cookie`, source.cookie(part.name));
    case "query":
      return oneValue(`The ${part.name} query parameter`, source.query(part.name));
    case "method":
      return facts.methods[0] ?? null;
    case "path":
      return facts.paths[0] ?? null;
    case "route":
      return matchedRoute(compiled, facts);
    case "host": {
      const host = source.host?.trim().toLowerCase().replace(/\.$/, "") ?? "";
      return host === "" ? null : host;
    }
    case "asn":
    case "ja4":
    case "country":
    case "colo":
      return cfValue(source, part.kind);
    case "const":
      return part.value;
    default: {
      const never: never = part;
      return never;
    }
  }
}

/**
 * Headers whose one value holds commas, so a comma is not a repetition (every other header given twice reaches the
 * Worker joined by `, `, which is read as two values).
 */
const WHOLE_HEADERS: ReadonlySet<string> = new Set(["user-agent", "date", "if-modified-since", "if-unmodified-since"]);

function splitHeader(name: string, value: string | null): readonly string[] {
  if (value === null) return [];
  return WHOLE_HEADERS.has(name) ? [value] : value.split(",");
}

/** The values of one cookie (`;` separates pairs; `,` too where fields were joined: a cookie value never holds one). */
export function cookieValues(header: string | null, name: string): string[] {
  if (header === null) return [];
  const out: string[] = [];
  for (const pair of header.split(/[;,]/)) {
    const eq = pair.indexOf("=");
    if (eq < 0) continue;
    if (pair.slice(0, eq).trim() === name) out.push(pair.slice(eq + 1));
  }
  return out;
}

/** Trimmed non-empty values: none (`null`), one (alike repeats are one), or two different (`{ two }`). */
function oneValue(what: string, values: readonly string[]): Value {
  let one: string | null = null;
  for (const raw of values) {
    const v = raw.trim();
    if (v === "") continue;
    if (one === null) one = v;
    else if (one !== v) return { two: what };
  }
  return one;
}

/**
 * The rule's route the request matched: its first matching `cost_by_route` entry, else the first of its `match.route`
 * routes that matches (as written), else `*` (a rule for any route).
 */
function matchedRoute(compiled: CompiledRule, facts: RequestFacts): string {
  const { rule } = compiled;
  const costs = facts.foldCase ? compiled.folded.costByRoute.map((e) => e.route) : rule.costByRoute.map((e) => e.route);
  const hit = firstMatch(costs, facts);
  if (hit >= 0) return rule.costByRoute[hit]!.route.source;
  const written = rule.match.route === null ? [] : [rule.match.route, ...rule.match.moreRoutes];
  const route = firstMatch(facts.foldCase ? compiled.folded.routes : written, facts);
  return route >= 0 ? written[route]!.source : "*";
}

function firstMatch(patterns: readonly RoutePattern[], facts: RequestFacts): number {
  for (const m of facts.methods) {
    for (const p of facts.paths) {
      const hit = patterns.findIndex((r) => routeMatches(r, m, p));
      if (hit >= 0) return hit;
    }
  }
  return -1;
}
