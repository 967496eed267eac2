/**
 * The "whose budget" step for `key:` rules (src/rules/key.ts): after the caller step, each such rule that matches the
 * request gets its key (src/request/key.ts `ruleKeyOf`, the function a replay calls too), hashed as every key is
 * (hash.ts) before it names an object or reaches a log. A request an enforcing rule cannot key (a part missing under
 * `key_missing: refuse`, a part given twice with different values) is refused with 400 before anything is counted.
 */
import { clientAddressKey } from "../request/identity.ts";
import { cookieValues, type KeySource, keyText, ruleKeyOf } from "../request/key.ts";
import { type CompiledRule, matchesRequest, type RequestFacts } from "../request/match.ts";
import { printKey } from "../rules/key.ts";
import { keyHashOf } from "./hash.ts";

/** A request whose key an enforcing rule cannot read: the 400 to answer. */
export interface KeyRefusal {
  readonly rule: string;
  readonly error: "key_part_missing" | "two_values";
  readonly detail: string;
}

/** What a key reads of a request: its headers, query, host and `request.cf`. */
export function keySourceOf(request: Request, url: URL): KeySource {
  const cf = request.cf as Record<string, unknown> | undefined;
  const bot = cf?.botManagement as Record<string, unknown> | undefined;
  const text = (v: unknown) => (typeof v === "string" || typeof v === "number" ? String(v) : null);
  return {
    header: (name) => request.headers.get(name),
    cookie: (name) => cookieValues(request.headers.get("cookie"), name),
    query: (name) => url.searchParams.getAll(name),
    host: url.hostname,
    address: request.headers.get("cf-connecting-ip"),
    cf: (field) => (field === "ja4" ? text(bot?.ja4) : text(cf?.[field])),
  };
}

/** Whether any rule has a `key:` (otherwise the step is skipped). */
export function hasKeyedRules(rules: readonly CompiledRule[]): boolean {
  return rules.some((c) => c.rule.key !== null);
}

/**
 * The hashed key of every `key:` rule that matches the request (`null`: the rule skips it), or the refusal of the
 * first enforcing rule that cannot key it. A shadow rule that cannot key a request skips it: it never blocks.
 */
export async function keyedRules(
  rules: readonly CompiledRule[],
  facts: RequestFacts,
  source: KeySource,
  options: { readonly ipv6PrefixBits: number; readonly keyHashSecret: string | null },
): Promise<{ readonly keyed: ReadonlyMap<string, string | null> } | { readonly refused: KeyRefusal }> {
  const keyed = new Map<string, string | null>();
  const pending: Promise<void>[] = [];
  for (const compiled of rules) {
    const { rule } = compiled;
    if (rule.key === null || !matchesRequest(compiled, facts)) continue;
    const key = ruleKeyOf(compiled, facts, source, options);
    if (key.kind === "refuse" && rule.mode === "enforce") {
      return { refused: { rule: rule.id, error: key.error, detail: key.detail } };
    }
    if (key.kind !== "key") {
      keyed.set(rule.id, null);
      continue;
    }
    pending.push(
      hashOf(options.keyHashSecret, key.text, rule.key.length === 0).then((h) => void keyed.set(rule.id, h)),
    );
  }
  await Promise.all(pending);
  return { keyed };
}

/** Hashes of `key: global` rules' one key, per secret: the same for every request. */
const globalHashes = new Map<string, Promise<string>>();

function hashOf(secret: string | null, text: string, constant: boolean): Promise<string> {
  if (!constant) return keyHashOf(secret, text);
  const memo = `${secret ?? ""}\u0000${text}`;
  let hash = globalHashes.get(memo);
  if (hash === undefined) {
    hash = keyHashOf(secret, text);
    if (globalHashes.size < 64) globalHashes.set(memo, hash);
  }
  return hash;
}

/**
 * The hash a `key:` rule counts a key by, from the raw key sent to the admin API (its X-Sluice-Key header): nothing
 * for `key: global`; one part's value as the client sends it; several parts' values as a JSON list of strings, in the key's order. Each value is read as the
 * gateway reads it (an API key or user hashed, an address masked, text trimmed); an API key is taken as verified.
 */
export async function adminKeyHash(
  compiled: CompiledRule,
  raw: string | null,
  settings: { readonly ipv6PrefixBits: number; readonly keyHashSecret: string | null },
): Promise<string | { readonly error: string }> {
  const parts = compiled.rule.key ?? [];
  if (parts.length === 0) return keyHashOf(settings.keyHashSecret, keyText([]));
  let given: unknown = raw;
  if (parts.length > 1) {
    try {
      given = JSON.parse(raw ?? "");
    } catch {
      given = null;
    }
  }
  const values = parts.length === 1 ? [given] : given;
  if (!Array.isArray(values) || values.length !== parts.length || !values.every((v) => typeof v === "string")) {
    return { error: `X-Sluice-Key must be a JSON list of ${parts.length} strings, one per part (${printKey(parts)}).` };
  }
  const out: string[] = [];
  for (const [i, part] of parts.entries()) {
    const v = (values[i] as string).trim();
    if (part.kind === "api_key" || part.kind === "user") out.push(await keyHashOf(settings.keyHashSecret, v));
    else if (part.kind === "ip") {
      const masked = clientAddressKey(v, part.v4, part.v6 ?? settings.ipv6PrefixBits);
      if (masked === null) return { error: `X-Sluice-Key part ${i + 1} (ip) is not an IPv4 or IPv6 address.` };
      out.push(masked);
    } else if (part.kind === "host") out.push(v.toLowerCase().replace(/\.$/, ""));
    else if (part.kind === "method" || part.kind === "country" || part.kind === "colo") out.push(v.toUpperCase());
    else out.push(v);
  }
  return keyHashOf(settings.keyHashSecret, keyText(out));
}
