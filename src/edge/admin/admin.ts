/**
 * The admin API under /_sluice/, for operators; every call needs `Authorization: Bearer <ADMIN_TOKEN>` but the page:
 *   GET  /_sluice/rules                   the resolved rules as deployed (limits in one line), and the deny rules
 *   GET  /_sluice/state?rule=ID           that key's remaining, reset and retry (not charged), and the lease held here
 *   POST /_sluice/reset?rule=ID           forget that key's state (both take key_hash=HEX, as a denial row shows)
 *   GET  /_sluice/account                 an API key's account record as the Worker reads it: plan, overrides
 * A raw key travels in the `X-Sluice-Key` header, never in the URL (URLs reach request logs), as the token does.
 *   GET  /_sluice/stats | /denials        this isolate's counters | its most recent denials (hashed keys)
 *   GET  /_sluice/bans                    the `block_for` bans running, from the ban index (hashed keys)
 *   GET  /_sluice/fleet?period=1h         the whole fleet's decisions from Analytics Engine (fleet.ts)
 *   GET  /_sluice/                        the dashboard page, which carries no data and asks for the token
 * The token is compared in constant time; wrong tokens are limited per client address (admin_guard.ts); without a
 * (long enough) token the whole surface answers 404. A raw key is hashed as the gateway hashes it; nothing lists raw
 * keys. `scope: local` rules answer for the isolate that served the call. docs/production.md, "Admin API", has more.
 */

import { BLOCKED_CACHE_MAX_ENTRIES } from "../../isolate/blocked_cache.ts";
import type { Isolate } from "../../isolate/isolate.ts";
import { logEvent } from "../../isolate/metrics.ts";
import { banIndexStub, delegateNameOf, delegateStub, limiterStub, objectNameOf } from "../../object/names.ts";
import { messageOf } from "../../protocol/object_call.ts";
import type { PeekResult } from "../../protocol/store.ts";
import { describeRule } from "../../replay/run.ts";
import { ADMIN_PREFIX, adminReading, isAdminPath } from "../../request/admin_path.ts";
import { problemResponse } from "../../request/headers.ts";
import { clientIpKey, identityKey } from "../../request/identity.ts";
import type { CompiledDeny, CompiledRule } from "../../request/match.ts";
import { MATCH_FIELDS } from "../../rules/fields.ts";
import { printKey } from "../../rules/key.ts";
import type { DenyRule, Identity, ResolvedRule } from "../../rules/types.ts";
import { unverifiedKeyText } from "../caller.ts";
import { keyHashOf, sha256Hex } from "../hash.ts";
import { adminKeyHash } from "../rule_keys.ts";
import type { Env, Settings } from "../settings.ts";
import { checkToken } from "./admin_guard.ts";
import { bansOf } from "./bans.ts";
import { dashboardPage } from "./dashboard.ts";
import { FleetError, fleetPeriodOf, fleetView } from "./fleet.ts";
import { FLEET_PERIODS } from "./fleet_sql.ts";

const JSON_HEADERS = { "Content-Type": "application/json", "Cache-Control": "no-store" };

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body, null, 2), { status, headers: JSON_HEADERS });
}

function problem(status: number, title: string, detail?: string, headers: [string, string][] = []): Response {
  return problemResponse(
    status,
    { type: "about:blank", title, status, ...(detail === undefined ? {} : { detail }) },
    headers,
  );
}

const notFound = () => problem(404, "Not Found");

/** The header that carries a raw key (an API key, address or user id) to `/state`, `/reset` and `/account`. */
export const ADMIN_KEY_HEADER = "X-Sluice-Key";

/** The raw key of an admin call (`null` when none was sent), or the 400 for one sent in the URL. */
function rawKeyOf(request: Request, url: URL): string | null | Response {
  if (url.searchParams.has("key")) {
    return problem(
      400,
      "Bad Request",
      `key= in a URL reaches request logs: send the raw key in the ${ADMIN_KEY_HEADER} header (or its hash as key_hash=).`,
    );
  }
  return request.headers.get(ADMIN_KEY_HEADER);
}

/**
 * The admin router: the answer to an admin path, or to another spelling of one (never forwarded: an upstream may read
 * it as /_sluice/... too); `null` for any other request, which the gateway answers.
 */
export async function routeAdmin(
  request: Request,
  url: URL,
  env: Env,
  settings: Settings,
  rules: readonly CompiledRule[],
  isolate: Isolate,
  denies: readonly CompiledDeny[] = [],
): Promise<Response | null> {
  if (isAdminPath(url.pathname)) return await handleAdmin(request, url, env, settings, { rules, denies }, isolate);
  if (adminReading(url.pathname)) return problemResponse(400, ADMIN_SPELLING);
  return null;
}

const ADMIN_SPELLING = {
  type: "about:blank",
  title: "Bad Request",
  status: 400,
  detail: "This path reads as the admin API (/_sluice/...) only in another spelling; it is not forwarded.",
  error: "admin_path_spelling",
} as const;

/** A deny rule's limits cell: its status, and what its match tests beyond plans and routes (addresses, values). */
function denyLimits(rule: DenyRule): string {
  const tests = MATCH_FIELDS.filter((m) => !["plan", "route", "except", "identity"].includes(m.yaml))
    .map((m) => [m.yaml, m.print(rule.match)] as const)
    .filter(([, v]) => v !== "any" && v !== "none")
    .map(([k, v]) => `${k} ${v}`);
  return [`deny, status ${rule.status}`, ...tests].join("; ");
}

async function handleAdmin(
  request: Request,
  url: URL,
  env: Env,
  settings: Settings,
  { rules, denies }: { readonly rules: readonly CompiledRule[]; readonly denies: readonly CompiledDeny[] },
  isolate: Isolate,
): Promise<Response> {
  if (settings.adminToken === null) return notFound();
  const method = request.method.toUpperCase();
  const route = url.pathname.slice(ADMIN_PREFIX.length);
  const allow = (allowed: string): Response | null =>
    method === allowed ? null : problem(405, "Method Not Allowed", undefined, [["Allow", allowed]]);
  if (route === "" || route === "/") return allow("GET") ?? (await dashboardPage());
  const refused = await checkToken(request, url, env, settings);
  if (refused !== null) return refused;
  const rawKey = rawKeyOf(request, url);
  if (rawKey instanceof Response) return rawKey;

  switch (route) {
    case "/rules":
      return (
        allow("GET") ??
        json({
          rules: rules.map((c) => ({ ...c.rule, limits: describeRule(c.rule) })),
          denies: denies.map((c) => ({ ...c.rule, limits: denyLimits(c.rule) })),
        })
      );
    case "/stats":
      return allow("GET") ?? json(statsOf(isolate, settings));
    case "/denials":
      return allow("GET") ?? json(denialsOf(isolate));
    case "/bans":
      return allow("GET") ?? json(await bansOf(env, isolate));
    case "/fleet":
      return allow("GET") ?? (await fleetRoute(url, settings, isolate));
    case "/account":
      return allow("GET") ?? (await accountRoute(rawKey, env, settings, rules, isolate));
    case "/state":
    case "/reset":
      return (
        allow(route === "/state" ? "GET" : "POST") ??
        (await keyRoute(route, url, rawKey, env, settings, rules, isolate))
      );
    default:
      return notFound();
  }
}

/** `/stats`: this isolate's counters and the bounds of its structures. */
function statsOf(isolate: Isolate, settings: Settings) {
  const local = isolate.local.stats();
  return {
    ...isolate.stats,
    local_keys: local.keys,
    local_bytes: local.bytes,
    local_evictions: local.evictions,
    max_keys: settings.maxKeys,
    cache_entries: isolate.blocked.size,
    cache_max_entries: BLOCKED_CACHE_MAX_ENTRIES,
    leases_held: isolate.calls.leasesHeld,
  };
}

/** `/denials`: the ring of this isolate's most recent denials. */
function denialsOf(isolate: Isolate) {
  return {
    capacity: isolate.denials.capacity,
    denials: isolate.denials.list().map((d) => ({
      at_ms: d.atMs,
      rule: d.rule,
      key: d.key,
      retry_after_ms: d.retryAfterMs,
      source: d.source,
      count: d.count,
    })),
  };
}

/** `/state` and `/reset` of `rule=` and a raw key: the key hashed as the gateway counts it, then asked or forgotten. */
async function keyRoute(
  route: "/state" | "/reset",
  url: URL,
  rawKey: string | null,
  env: Env,
  settings: Settings,
  rules: readonly CompiledRule[],
  isolate: Isolate,
): Promise<Response> {
  const ruleId = url.searchParams.get("rule");
  const givenHash = url.searchParams.get("key_hash");
  const compiled = rules.find((c) => c.rule.id === ruleId);
  // A `key: global` rule has one key: it needs none.
  const global = compiled?.rule.key?.length === 0 && givenHash === null;
  if (ruleId === null || ((rawKey === null) === (givenHash === null) && !global)) {
    return problem(
      400,
      "Bad Request",
      `rule= and one of the ${ADMIN_KEY_HEADER} header (the raw key) or key_hash= (its hash) are required.`,
    );
  }
  if (compiled === undefined) return problem(404, "Not Found", `No rule ${JSON.stringify(ruleId.slice(0, 100))}.`);
  const { rule } = compiled;
  const identity = rule.match.identity;
  const counted =
    givenHash !== null
      ? /^[0-9a-f]{64}$/.test(givenHash)
        ? givenHash
        : { error: "key_hash= must be the 64 lower-case hex digits of a hashed key." }
      : identity === null
        ? await adminKeyHash(compiled, rawKey, settings)
        : await countedKeyHash(identity, rawKey!, env, settings, isolate, rules);
  if (typeof counted !== "string") return problem(400, "Bad Request", counted.error);
  const keyHash = counted;
  const base = { rule: rule.id, scope: rule.scope, identity: identity ?? `key: ${printKey(rule.key)}`, key: keyHash };
  try {
    if (route === "/reset") return await stateOrReset(route, env, settings, isolate, compiled, keyHash, base);
    // By hash, the account is known only when hashes are plain SHA-256 (the account record's key).
    const accountHash = rawKey !== null ? await sha256Hex(rawKey) : settings.keyHashSecret === null ? keyHash : null;
    const applied = await limitFor(env, settings, isolate, rules, compiled, accountHash);
    // `override`: the key's account has its own limit for this rule (a per-account override), and it applies.
    // A versioned record stamps its version on the key's other rules too (account_cache.ts): only other parameters
    // make an override.
    const limit = { quota: applied.capacity, override: applied.params !== compiled.params };
    return await stateOrReset(route, env, settings, isolate, applied, keyHash, { ...base, ...limit });
  } catch (error) {
    logEvent("error", { event: "admin_failed", rule: rule.id, key: keyHash, error: messageOf(error) });
    return problem(503, "Service Unavailable", `The limiter for ${rule.id} did not answer.`, [["Retry-After", "1"]]);
  }
}

/** The rule as it applies to this key: with the key's account override, if it has one (api_key rules only). */
async function limitFor(
  env: Env,
  settings: Settings,
  isolate: Isolate,
  rules: readonly CompiledRule[],
  compiled: CompiledRule,
  accountHash: string | null,
): Promise<CompiledRule> {
  if (compiled.rule.match.identity !== "api_key") return compiled;
  const ttlMs = settings.planCacheTtlMs;
  const account = await isolate.accounts.accountFor(
    env.ACCOUNTS,
    accountHash,
    rules,
    ttlMs,
    isolate.clock(),
    isolate.sleep,
  );
  return account?.overrides.get(compiled.rule.id) ?? compiled;
}

/** `/fleet?period=`: the fleet view from Analytics Engine, or how to enable it; 502 when its API fails. */
async function fleetRoute(url: URL, settings: Settings, isolate: Isolate): Promise<Response> {
  const period = fleetPeriodOf(url.searchParams.get("period"));
  if (period === null) {
    const names = FLEET_PERIODS.map((p) => p.name).join(", ");
    return problem(400, "Bad Request", `period= must be one of ${names}.`);
  }
  try {
    return json(await fleetView(settings.fleet, period, isolate.clock()));
  } catch (error) {
    if (!(error instanceof FleetError)) throw error;
    logEvent("error", { event: "fleet_failed", status: error.status, error: error.message });
    return problem(502, "Bad Gateway", error.message);
  }
}

/** `/account` of a raw API key: its account record as the Worker reads it (plan, valid overrides with their limits). */
async function accountRoute(
  key: string | null,
  env: Env,
  settings: Settings,
  rules: readonly CompiledRule[],
  isolate: Isolate,
): Promise<Response> {
  if (key === null || key === "") {
    return problem(400, "Bad Request", `The ${ADMIN_KEY_HEADER} header (the raw API key) is required.`);
  }
  const hash = await sha256Hex(key);
  const ttlMs = settings.planCacheTtlMs;
  const account = await isolate.accounts.accountFor(env.ACCOUNTS, hash, rules, ttlMs, isolate.clock(), isolate.sleep);
  return json({
    account: hash,
    found: account !== null,
    plan: account?.plan ?? settings.defaultPlan,
    // Each override as the rule it makes for this account: the rule with the account's own parameters.
    overrides: [...(account?.overrides.values() ?? [])]
      .filter((o) => rules.find((c) => c.rule.id === o.rule.id)?.params !== o.params)
      .map((o) => {
        const applied = { ...o.rule, ...o.params } as ResolvedRule;
        return { ...applied, limits: describeRule(applied) };
      }),
  });
}

async function stateOrReset(
  route: "/state" | "/reset",
  env: Env,
  settings: Settings,
  isolate: Isolate,
  compiled: CompiledRule,
  keyHash: string,
  base: Record<string, string | number | boolean>,
): Promise<Response> {
  const { rule } = compiled;
  if (route === "/state") {
    const peek: PeekResult =
      rule.scope === "local"
        ? isolate.local.peek(compiled, settings.maxKeys, keyHash, isolate.clock())
        : ((await limiterStub(env.LIMITER, rule.id, keyHash).peek({
            rule: { id: rule.id, params: compiled.params },
          })) as PeekResult);
    // Units this isolate holds of the key's budget (already charged in the object), said plainly.
    const lease = rule.scope === "local" ? null : isolate.calls.leaseOf(objectNameOf(rule.id, keyHash));
    return json({
      ...base,
      remaining: peek.remaining,
      reset_after_ms: peek.resetAfterMs,
      retry_after_ms: peek.retryAfterMs,
      ban_ends_in_ms: peek.banUntilMs === undefined ? null : peek.banUntilMs - peek.atMs,
      lease: lease === null ? null : { units_left: lease.unitsLeft, units: lease.units, ends_in_ms: lease.endsInMs },
    });
  }
  isolate.blocked.forget(objectNameOf(rule.id, keyHash));
  if (rule.scope !== "local") isolate.calls.dropLease(objectNameOf(rule.id, keyHash));
  const existed =
    rule.scope === "local"
      ? isolate.local.delete(compiled, settings.maxKeys, keyHash)
      : await resetGlobal(env, rule.id, keyHash);
  logEvent("log", { event: "admin_reset", rule: rule.id, key: keyHash, existed });
  return json({ ...base, reset: true, existed });
}

/**
 * The key hash the gateway counts `raw` by under a rule of `identity`. For `api_key` rules that is the key's own hash
 * only for a key with an account record; callers without one are counted by their address, so `raw` may be an
 * address (the bucket its unverified callers share).
 */
async function countedKeyHash(
  identity: Identity,
  raw: string,
  env: Env,
  settings: Settings,
  isolate: Isolate,
  rules: readonly CompiledRule[],
): Promise<string | { readonly error: string }> {
  const key = identityKey(identity, raw, settings);
  if (identity === "api_key") {
    const accountKey = key === null ? null : await sha256Hex(key);
    const plan = await isolate.accounts.accountFor(
      env.ACCOUNTS,
      accountKey,
      rules,
      settings.planCacheTtlMs,
      isolate.clock(),
      isolate.sleep,
    );
    if (key !== null && plan !== null) return keyHashOf(settings.keyHashSecret, key);
    const address = clientIpKey(raw, settings.ipv6PrefixBits);
    if (address !== null) return keyHashOf(settings.keyHashSecret, unverifiedKeyText(address));
    return {
      error:
        `${ADMIN_KEY_HEADER} is not an API key with an account record, nor a client address: callers without a known ` +
        "key are counted by their address, so pass that.",
    };
  }
  if (key === null) return { error: `${ADMIN_KEY_HEADER} is not a ${identity} the gateway would count by.` };
  return keyHashOf(settings.keyHashSecret, key);
}

/**
 * Reset a global key: its object, then the delegates it knew holding a share (their shares' units or parts, charged
 * or promised by the record just forgotten, would keep admitting until their terms end). A delegate that got a share
 * between the two keeps it until its term ends (under-admission only if it then asks again: the object forgot it).
 */
async function resetGlobal(env: Env, ruleId: string, keyHash: string): Promise<boolean> {
  const stub = limiterStub(env.LIMITER, ruleId, keyHash);
  const delegates = env.DELEGATE === undefined ? [] : await stub.shareHolders();
  const existed = await stub.reset();
  const object = objectNameOf(ruleId, keyHash);
  await banIndexStub(env.LIMITER).forgetBan(object);
  await Promise.all(
    delegates.map((id) => {
      const dot = id.lastIndexOf(".");
      const region = id.slice(0, dot) === "any" ? null : id.slice(0, dot);
      const name = delegateNameOf(object, region, Number(id.slice(dot + 1)));
      return delegateStub(env.DELEGATE!, name, region).reset();
    }),
  );
  return existed;
}
