/**
 * The replay's "whose budget" step for `key:` rules, as the gateway's (src/edge/rule_keys.ts) but from a request
 * trace line: the same `ruleKeyOf` (src/request/key.ts) over what the line carries (version 2 traces carry the host,
 * `request.cf`'s fields and the headers, cookies and query parameters the rules name). Keys stay text: a replay names
 * no object. A line without a field reads as a request without it.
 */
import { type KeySource, ruleKeyOf } from "../request/key.ts";
import { type CompiledRule, matchesRequest, type RequestFacts } from "../request/match.ts";
import type { RequestLine } from "./request_trace.ts";

/** What a key reads of a trace line. */
export function lineSource(line: RequestLine): KeySource {
  const fields = line.fields;
  return {
    header: (name) => fields?.get(`header:${name}`)?.[0] ?? null,
    cookie: (name) => fields?.get(`cookie:${name}`) ?? [],
    query: (name) => fields?.get(`query:${name}`) ?? [],
    host: line.host ?? null,
    address: line.address,
    cf: (field) => line[field] ?? null,
  };
}

/**
 * The key of every `key:` rule that matches the line (`null`: the rule skips it), or the 400's detail of the first
 * enforcing rule that cannot key it (a shadow rule skips).
 */
export function lineKeys(
  rules: readonly CompiledRule[],
  facts: RequestFacts,
  line: RequestLine,
  options: { readonly ipv6PrefixBits: number },
): { readonly keyed: ReadonlyMap<string, string | null> } | { readonly refused: string } {
  const keyed = new Map<string, string | null>();
  const source = lineSource(line);
  for (const compiled of rules) {
    const { rule } = compiled;
    if (rule.key === null || !matchesRequest(compiled, facts)) continue;
    const key = ruleKeyOf(compiled, facts, source, options);
    if (key.kind === "refuse" && rule.mode === "enforce") return { refused: key.detail };
    keyed.set(rule.id, key.kind === "key" ? key.text : null);
  }
  return { keyed };
}
