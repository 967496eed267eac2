/**
 * What a Cloudflare rate limiting rule counts, in Sluice terms: its characteristics as the rule's key, and its
 * counting expression as `count_when`. Each returns what it maps, what differs (approximate, or a note) and what
 * cannot be said (left out), for cloudflare_import.ts to report.
 */
import { COOKIE_OR_QUERY_NAME, clientChosenWarning, HEADER_NAME, type KeyPart } from "../rules/key.ts";
import { conjuncts, ExpressionSyntaxError, type Node, normalText, parseExpression } from "./cloudflare_expr.ts";

/** A text of the file and where it is (`file:line:col`), which a finding about it names. */
export interface Located {
  readonly value: string;
  readonly at: string;
}

/** What a finding says, and where in the file (`file:line:col`) the value it is about is. */
export interface Finding {
  readonly message: string;
  readonly at: string;
}

/** What differs or cannot be said: `approximate` (Sluice stricter), `note`, or `left out`. */
export interface Findings {
  readonly approximate: Finding[];
  readonly notes: Finding[];
  readonly leftOut: Finding[];
}

export interface KeyOf {
  /** `ip` alone: `match.identity: ip`. */
  readonly identity: "ip" | null;
  /** `global`, or the parts in rule-file flow style; `null` with an identity. */
  readonly key: "global" | readonly string[] | null;
  /** `key_client_chosen: accept`: Cloudflare counted every value of a client-chosen part too. */
  readonly clientChosen: boolean;
}

/** Characteristics Sluice has a bare key part for. */
const BARE: Readonly<Record<string, KeyPart["kind"]>> = {
  "ip.src": "ip",
  "http.host": "host",
  "http.request.uri.path": "path",
  "ip.src.asnum": "asn",
  "ip.geoip.asnum": "asn",
  "ip.src.country": "country",
  "ip.geoip.country": "country",
  "cf.bot_management.ja4": "ja4",
};

const LEFT_OUT: Readonly<Record<string, string>> = {
  "cf.unique_visitor_id":
    "IP with NAT support is Cloudflare's own visitor identification (cookies among others), which a Worker does not see",
  "cf.bot_management.ja3_hash": "Sluice keys have no JA3 part (ja4 is one)",
};

const MAP = /^http\.request\.(headers|cookies|uri\.args)\["((?:[^"\\]|\\.)*)"\]$/;

/**
 * The key for `characteristics`. `cf.colo.id` is always there: Cloudflare keeps a counter per data center, where
 * Sluice keeps one for all of them, so a client spread over several data centers gets less in Sluice (approximate).
 * Each finding is at the characteristic it is about.
 */
// long: one branch per kind of characteristic, each with its own message
export function keyOf(characteristics: readonly Located[], found: Findings): KeyOf {
  const parts: KeyPart[] = [];
  let ipAt: string | null = null;
  for (const { value: c, at } of characteristics) {
    const say = (list: Finding[], message: string) => list.push({ message, at });
    const bare = BARE[c];
    const map = MAP.exec(c);
    if (c === "cf.colo.id") {
      say(
        found.approximate,
        "Cloudflare counts per data center (cf.colo.id); Sluice counts across all of them, so a client spread over several gets less (add the colo key part to count per data center)",
      );
    } else if (bare !== undefined) {
      parts.push({ kind: bare } as KeyPart);
      if (bare === "ip") ipAt ??= at;
    } else if (map !== null) {
      const kind = map[1] === "headers" ? "header" : map[1] === "cookies" ? "cookie" : "query";
      const name = kind === "header" ? map[2]!.toLowerCase() : map[2]!;
      if (kind === "header" && (name === "authorization" || name === "x-api-key")) {
        parts.push({ kind: "api_key" });
        say(
          found.approximate,
          `Cloudflare counts the ${name} header as sent; Sluice counts the verified API key, and a caller without a known one by its address`,
        );
      } else if (kind === "header" && name === "cf-connecting-ip") {
        parts.push({ kind: "ip", v4: 32, v6: null });
        ipAt ??= at;
      } else if (!(kind === "header" ? HEADER_NAME : COOKIE_OR_QUERY_NAME).test(name) || name === "cookie")
        say(found.leftOut, `the characteristic ${c}: ${JSON.stringify(name)} is not a ${kind} name a key part takes`);
      else {
        parts.push({ kind, name });
        say(
          found.notes,
          `a request without ${kind} ${name} is counted with those sending it empty (key_missing: empty); Cloudflare counts the two apart`,
        );
      }
    } else {
      say(
        found.leftOut,
        `the characteristic ${c}: ${LEFT_OUT[c] ?? "not one Sluice has a key part for (body fields, JWT claims, custom expressions)"}`,
      );
    }
  }
  const unique = parts.filter((p, i) => parts.findIndex((q) => printPart(q) === printPart(p)) === i);
  if (ipAt !== null)
    found.notes.push({
      message: "Sluice counts an IPv6 client by its /64 (IPV6_PREFIX); Cloudflare by its whole address",
      at: ipAt,
    });
  if (unique.length === 0) return { identity: null, key: "global", clientChosen: false };
  if (unique.length === 1 && unique[0]!.kind === "ip") return { identity: "ip", key: null, clientChosen: false };
  return { identity: null, key: unique.map(printPart), clientChosen: clientChosenWarning(unique) !== null };
}

function printPart(p: KeyPart): string {
  if (p.kind === "header" || p.kind === "cookie" || p.kind === "query")
    return `{ ${p.kind}: ${/^[A-Za-z0-9_.-]+$/.test(p.name) ? p.name : JSON.stringify(p.name)} }`;
  return p.kind;
}

/**
 * `count_when` for a counting expression, in flow style, or `null` (count every request the rule matches). Only
 * response status tests are read (`http.response.code eq 401`, `in {401 403}`, `in {500..599}`); its other tests
 * must be the rule expression's own, as Cloudflare's documentation advises, since without them Cloudflare counts
 * matching responses to requests the rule does not match.
 */
// long: each way a counting expression is read or refused, with its finding at the expression
export function countWhenOf(counting: Located, expression: Node, found: Findings): string | null {
  if (counting.value.trim() === "") return null;
  const say = (list: Finding[], message: string) => list.push({ message, at: counting.at });
  let tree: Node;
  try {
    tree = parseExpression(counting.value);
  } catch (err) {
    if (!(err instanceof ExpressionSyntaxError)) throw err;
    say(found.leftOut, `the counting expression does not parse as one the import reads: ${err.message}`);
    return null;
  }
  const own = new Set(conjuncts(expression).map(normalText));
  const statuses: (number | string)[] = [];
  const others: string[] = [];
  for (const test of conjuncts(tree)) {
    if (test.kind === "compare" && test.field.name === "http.response.code" && !test.field.len) {
      const read = statusesOf(test);
      if (typeof read === "string" || statuses.length > 0) {
        say(
          found.leftOut,
          `the counting expression's \`${test.text}\`: ${typeof read === "string" ? read : "a second status test"}`,
        );
        return null;
      }
      statuses.push(...read);
    } else others.push(normalText(test));
  }
  const foreign = others.filter((t) => !own.has(t));
  if (foreign.length > 0) {
    say(
      found.leftOut,
      `the counting expression tests \`${foreign.join("` and `")}\`, which the rule's expression does not; count_when tests the response status only`,
    );
    return null;
  }
  if (statuses.length === 0) return null;
  if (expression.kind !== "bool" && new Set(others).size < own.size)
    say(
      found.approximate,
      "the counting expression does not repeat the rule's expression, so Cloudflare also counts those responses to requests the rule does not match; Sluice counts only the requests it matches",
    );
  const list = statuses.length === 1 ? String(statuses[0]) : `[${statuses.join(", ")}]`;
  return `{ status: ${list} }`;
}

/** Status codes and classes (`5xx`) of one test, or why not. */
function statusesOf(test: Node & { kind: "compare" }): (number | string)[] | string {
  if (test.op !== "eq" && test.op !== "in") return `the status is read with eq or in, not ${test.op}`;
  const out: (number | string)[] = [];
  for (const v of test.values) {
    if (v.kind === "number" && v.n >= 100 && v.n <= 599) out.push(v.n);
    else if (v.kind === "range" && v.from % 100 === 0 && v.to === v.from + 99 && v.from >= 100 && v.to <= 599)
      out.push(`${v.from / 100}xx`);
    else if (v.kind === "range" && v.from >= 100 && v.to <= 599 && v.to >= v.from && v.to - v.from < 20)
      for (let n = v.from; n <= v.to; n++) out.push(n);
    else return `${v.kind === "range" ? `${v.from}..${v.to}` : JSON.stringify(v)} is not a status or a class of them`;
  }
  return out;
}
