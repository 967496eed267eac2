/**
 * A map over several variables written together (`map $limit_header$limit_arg $key`: the corpus's hectcastro, the
 * API key from a header, else a query parameter, else the address), where each variable is itself a map saying only
 * whether a client value is sent (`default 0; "~.+" 1;`). Each combination of sent and not sent makes one string,
 * which the outer map turns into a key as NGINX does (strings ignoring case, then regexes in order, then `default`).
 * Each key is one rule, its conditions the values that decide it (empty or not: `matches: ^$` with `missing_as_empty`,
 * as NGINX reads a value not sent as empty); a key given to combinations that no such tests pick alone (`11` and `00`,
 * not `10`) is refused, as is any other inner map.
 */
import type { MatchCondition } from "../rules/types.ts";
import { emptyTest } from "./empty_test.ts";
import type { Expanded, NginxMap } from "./nginx_map_sources.ts";

/** A flag map: the client value it reads, and the constant it gives when that value is not sent and when it is. */
interface Flag {
  readonly source: MatchCondition["in"];
  readonly name: string;
  readonly absent: string;
  readonly present: string;
}

type Lookup = (name: string) => NginxMap | { readonly other: true } | undefined;

const VARIABLE = /\$\{?([A-Za-z0-9_]+)\}?/g;
/** A regex that every non-empty value matches (`~.`, `~.+`, `~^.+$`, `~*.`), as nginx_map_sources.ts reads one. */
const ANY_VALUE = /^~\*?\^?\.[+*]?\$?$/;
/** At most this many flags: 2^4 combinations. */
const MAX_FLAGS = 4;

/** Whether `source` is written as more than one variable (with text between them or not). */
export function isConcatenation(source: string): boolean {
  return [...source.matchAll(VARIABLE)].length > 1;
}

/** The outer map `map` (setting `$name`) over flag maps, as one rule per key, or why it cannot be. */
export function overFlags(name: string, map: NginxMap, lookup: Lookup): Expanded {
  const said = map.said ?? `map ${map.source} $${name}`;
  const vars = [...map.source.matchAll(VARIABLE)];
  if (vars.length > MAX_FLAGS) return { refused: `${said}: a map over more than ${MAX_FLAGS} variables` };
  if (new Set(vars.map((v) => v[1])).size < vars.length) return { refused: `${said}: it reads one variable twice` };
  const flags: Flag[] = [];
  for (const v of vars) {
    const flag = flagOf(lookup(v[1]!));
    if (typeof flag === "string")
      return {
        refused: `${said}: a map over several variables is imported when each is a map of whether a header, cookie or query value is sent (constants), and $${v[1]} ${flag}`,
      };
    flags.push(flag);
  }
  const byKey = new Map<string, boolean[][]>();
  for (let bits = 0; bits < 2 ** flags.length; bits++) {
    const sent = flags.map((_, i) => (bits & (1 << i)) !== 0);
    let text = map.source;
    vars.forEach((v, i) => {
      text = text.replace(v[0], sent[i]! ? flags[i]!.present : flags[i]!.absent);
    });
    const key = mapped(map, text);
    if (key instanceof Error) return { refused: `${said}: ${key.message}` };
    const inner = [...key.matchAll(VARIABLE)].find((v) => lookup(v[1]!) !== undefined);
    if (inner !== undefined)
      return { refused: `${said} gives $${inner[1]}, itself a map: one map over another is not imported` };
    if (key !== "") byKey.set(key, [...(byKey.get(key) ?? []), sent]);
  }
  if (byKey.size === 0) return { refused: `${said} gives every request an empty key, so NGINX limits nothing with it` };
  const variants: { key: string; conditions: readonly MatchCondition[] }[] = [];
  for (const [key, combos] of byKey) {
    const conditions = conditionsOf(flags, combos);
    if (conditions === null) {
      return {
        refused: `${said} gives ${key} to requests that send some of ${flags.map(said1).join(", ")} in a mix that no set of tests picks alone; one rule per key cannot say it`,
      };
    }
    variants.push({ key, conditions });
  }
  const which = variants.map(
    (v) => `${v.key} (${v.conditions.length === 0 ? "every request" : v.conditions.map(conditionText).join(", ")})`,
  );
  return {
    variants,
    notes: [
      `${said} gives ${which.join("; ")}: one rule per key (match.header, match.cookie, match.query); NGINX counts them in one zone, so a value two of them share would be one budget there`,
    ],
  };
}

/** A variable's map as a flag, or what it is instead. */
function flagOf(found: ReturnType<Lookup>): Flag | string {
  if (found === undefined) return "is not a map (its values cannot be listed)";
  if ("other" in found) return "is not a map of constants";
  const source = /^\$\{?(http|cookie|arg)_([A-Za-z0-9_]+)\}?$/.exec(found.source);
  if (source === null) return `is a map over ${found.source}, not over a header, cookie or query value`;
  const results = [...found.entries.map((e) => e.result), found.fallback];
  if (results.some((r) => r.includes("$"))) return "gives a variable, not a constant";
  if (found.entries.some((e) => e.value !== "" && !ANY_VALUE.test(e.value)))
    return "tests particular values, not only whether one is sent";
  // Strings are tried first: "" is the request without the value; then the regexes, in order (`~.*` takes "" too).
  const absent =
    found.entries.find((e) => e.value === "")?.result ??
    found.entries.find((e) => e.value !== "" && regexOf(e.value).test(""))?.result ??
    found.fallback;
  const present = found.entries.find((e) => e.value !== "")?.result ?? found.fallback;
  const [kind, raw] = [source[1]!, source[2]!];
  return kind === "http"
    ? { source: "header", name: raw.replaceAll("_", "-"), absent, present }
    : { source: kind === "cookie" ? "cookie" : "query", name: raw, absent, present };
}

/** What `map` gives `text`: its strings ignoring case, then its regexes in order, then its default. */
function mapped(map: NginxMap, text: string): string | Error {
  const exact = map.entries.find((e) => !e.value.startsWith("~") && e.value.toLowerCase() === text.toLowerCase());
  if (exact !== undefined) return exact.result;
  for (const e of map.entries) {
    if (!e.value.startsWith("~")) continue;
    let re: RegExp;
    try {
      re = regexOf(e.value);
    } catch (err) {
      return new Error(`its regex ${e.value} is not one JavaScript reads (${(err as Error).message})`);
    }
    if (re.test(text)) return e.result;
  }
  return map.fallback;
}

function regexOf(value: string): RegExp {
  return value.startsWith("~*") ? new RegExp(value.slice(2), "i") : new RegExp(value.slice(1));
}

/** The tests picking exactly `combos` (each a flag's sent or not), or `null` when they are not all of some tests' picks. */
function conditionsOf(flags: readonly Flag[], combos: readonly boolean[][]): MatchCondition[] | null {
  const conditions: MatchCondition[] = [];
  let picked = 1;
  flags.forEach((f, i) => {
    const seen = new Set(combos.map((c) => c[i]!));
    picked *= seen.size;
    if (seen.size === 1) {
      const sent = [...seen][0]!;
      conditions.push(emptyTest(f.source, f.name, !sent));
    }
  });
  return picked === combos.length ? conditions : null;
}

function said1(f: Flag): string {
  return `the ${f.name} ${f.source === "query" ? "query parameter" : f.source}`;
}

function conditionText(c: MatchCondition): string {
  return `${said1({ source: c.in, name: c.name, absent: "", present: "" })} ${c.not ? "sent with a value" : "not sent or empty"}`;
}
