/**
 * What Envoy descriptors mean to Sluice. A descriptor's values come from Envoy's route actions, which the imported
 * files do not contain, so a small mapping (`--map`) says what each descriptor key stands for: a per-client identity,
 * a route, a plan, or any request. A descriptor chain becomes a rule's match through it.
 */

import { parseAddressRange } from "../rules/address_range.ts";
import { escapeRegex } from "../rules/match_conditions.ts";
import { compileRoute } from "../rules/route.ts";
import type { MatchCondition } from "../rules/types.ts";
import { intersectRoutes } from "./nginx_routes.ts";
import { conditionFields, type DraftRule, type ReportItem } from "./report.ts";

/** What a descriptor key (or key and value) stands for. */
export type Meaning =
  /** `note`: what differs, for the report (a forwarded-address header counted as the address). */
  | {
      readonly kind: "identity";
      readonly identity: "api_key" | "ip" | "user";
      /** Only requests on these routes send it (the routes whose `rate_limits` have the action). */
      readonly routes?: string | readonly string[];
      readonly note?: string;
      /** The header that carries the address (lower-case): a value of it is a `match.header` (never a key's). */
      readonly header?: string;
    }
  /** A part of the rule's key other than an identity: a header's value, the client address masked. */
  | {
      readonly kind: "part";
      readonly part: string;
      readonly text: string;
      /** The request header it reads, lower-case (a `request_headers` action): a value of it is a `match.header`. */
      readonly header?: string;
      /** Only requests on these routes send it (`destination_cluster`: the routes that name a cluster). */
      readonly routes?: string | readonly string[];
      /** What differs, for the report. */
      readonly note?: string;
    }
  /**
   * `note`: where the route says more requests than Envoy sends it (approximate, for the report); `conditions`: the
   * conditions a `header_value_match` adds (`match.header`).
   */
  | {
      readonly kind: "route";
      readonly route: string | readonly string[];
      readonly note?: string;
      readonly conditions?: readonly MatchCondition[];
    }
  | { readonly kind: "plan"; readonly plan: string }
  | { readonly kind: "any"; readonly note?: string; readonly conditions?: readonly MatchCondition[] }
  /** A descriptor that an Envoy route action sends for requests no Sluice match can pick out (envoy_actions.ts). */
  | { readonly kind: "refused"; readonly why: string };

export type EnvoyMapping = ReadonlyMap<string, Meaning>;

const MEANINGS = "api_key, ip, user, header:NAME, ip:V4:V6, any, plan:NAME or route:METHOD /path";

/**
 * `KEY=api_key|ip|user|header:NAME|ip:V4:V6` or `KEY:VALUE=route:METHOD /path|plan:NAME|any`, parsed; or why not.
 * The defaults are Envoy's actions' own descriptor keys: `remote_address` (the address), `masked_remote_address`
 * (the address under the action's masks, /32 and /128 unless its config says otherwise), and `generic_key`, whose
 * value the route action names: any request (the routes that set it are in Envoy's route configuration).
 */
export function parseMapping(specs: readonly string[]): { mapping: Map<string, Meaning> } | { error: string } {
  const mapping = new Map<string, Meaning>([
    ["remote_address", ADDRESS],
    ["masked_remote_address", maskedIp(32, 128)],
    ["generic_key:*", { kind: "any" }],
  ]);
  for (const spec of specs) {
    const eq = spec.indexOf("=");
    if (eq <= 0) return { error: `--map ${JSON.stringify(spec)}: expected KEY=MEANING or KEY:VALUE=MEANING` };
    const target = spec.slice(0, eq);
    const meaning = spec.slice(eq + 1);
    const ip = /^ip:(\d{1,2}):(\d{1,3})$/.exec(meaning);
    if (meaning === "api_key" || meaning === "ip" || meaning === "user") {
      mapping.set(target, { kind: "identity", identity: meaning });
    } else if (ip !== null && Number(ip[1]) >= 1 && Number(ip[1]) <= 32 && Number(ip[2]) >= 1 && Number(ip[2]) <= 128) {
      mapping.set(target, maskedIp(Number(ip[1]), Number(ip[2])));
    } else if (/^header:[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$/.test(meaning)) {
      mapping.set(target, headerMeaning(meaning.slice(7).toLowerCase()));
    } else if (meaning === "any") {
      mapping.set(target, { kind: "any" });
    } else if (meaning.startsWith("plan:") && meaning.length > 5) {
      mapping.set(target, { kind: "plan", plan: meaning.slice(5) });
    } else if (meaning.startsWith("route:")) {
      const route = compileRoute(meaning.slice(6));
      if ("error" in route) return { error: `--map ${target}: route ${route.error}` };
      mapping.set(target, { kind: "route", route: route.source });
    } else {
      return { error: `--map ${target}: expected ${MEANINGS}, got ${JSON.stringify(meaning)}` };
    }
  }
  return { mapping };
}

/** The client address: Envoy's `remote_address`, CF-Connecting-IP to Sluice. */
export const ADDRESS: Meaning = { kind: "identity", identity: "ip", header: "cf-connecting-ip" };

/** A key's meaning when it names a caller (a value of it is then one caller's), else `null`. */
function perCaller(meaning: Meaning | undefined): Meaning | null {
  return meaning?.kind === "identity" || meaning?.kind === "part" ? meaning : null;
}

/**
 * Whether `key=value` is a value of the client address: the key means the address (`remote_address`, a
 * `masked_remote_address` part) and nothing maps the value itself, which is an address or a CIDR range (the service's
 * value for a masked address is the masked range, `198.51.100.0/24`).
 */
export function addressValue(mapping: EnvoyMapping, key: string, value: string): boolean {
  if (mapping.get(`${key}:${value}`) !== undefined) return false;
  const m = mapping.get(key);
  const range = parseAddressRange(value);
  if ("error" in range) return false;
  // `remote_address` is one whole address; a masked one is the range at the action's mask (else it never matches).
  if (m?.kind === "identity" && m.identity === "ip") return !value.includes("/");
  const masks = m?.kind === "part" ? /^\{ ip: \{ v4: (\d+), v6: (\d+) \} \}$/.exec(m.part) : null;
  if (masks === null) return false;
  const v4 = range.groups.slice(0, 6).join() === "0,0,0,0,0,65535";
  return value.includes("/") && range.bits === (v4 ? 96 + Number(masks[1]) : Number(masks[2]));
}

/** Headers that carry the client's address as a proxy in front forwards it. */
const FORWARDED_ADDRESS = new Set(["x-forwarded-for", "x-real-ip", "true-client-ip", "x-client-ip"]);

/**
 * A request header's value as a descriptor: a key part, or the identity the gateway reads from that header
 * (CF-Connecting-IP is the client address, Authorization and X-API-Key the API key; a key may not name them).
 */
export function headerMeaning(name: string): Meaning {
  if (name === "cf-connecting-ip") return ADDRESS;
  if (FORWARDED_ADDRESS.has(name)) {
    return {
      kind: "identity",
      identity: "ip",
      header: name,
      note: `Envoy counts the ${name} header as sent, which a client can rotate; Sluice counts by the address Cloudflare saw (CF-Connecting-IP), which it cannot`,
    };
  }
  if (name === "authorization" || name === "x-api-key") return { kind: "identity", identity: "api_key" };
  if (name === "cookie")
    return { kind: "refused", why: "the whole Cookie header is not a key part (a rule keys on one cookie)" };
  return { kind: "part", part: `{ header: ${name} }`, text: `the ${name} header`, header: name };
}

/**
 * The client address under Envoy's masks. A 0-bit mask puts every address of that family in one counter: both 0 is
 * one budget for every client; one of them 0 cannot be a Sluice part (its prefix lengths start at 1).
 */
export function maskedIp(v4: number, v6: number): Meaning {
  if (v4 === 0 && v6 === 0) return { kind: "any" };
  if (v4 < 1 || v4 > 32 || v6 < 1 || v6 > 128) {
    return {
      kind: "refused",
      why: `masked_remote_address with v4_prefix_mask_len ${v4} and v6_prefix_mask_len ${v6}: a Sluice ip part masks to 1-32 and 1-128 bits, so one family in one counter and the other per address cannot be said`,
    };
  }
  return { kind: "part", part: `{ ip: { v4: ${v4}, v6: ${v6} } }`, text: `the client address (/${v4}, /${v6})` };
}

/** Descriptor keys whose values Envoy takes from its own configuration, and what to give to read them. */
const ROUTE_FACTS: Readonly<Record<string, string>> = {
  destination_cluster:
    "the cluster Envoy routes the request to: give --envoy FILE with the route configuration (each cluster's routes), or --map destination_cluster:NAME=route:METHOD /path",
  source_cluster:
    "the calling Envoy's own cluster (node.cluster, --service-cluster): give --envoy FILE with its bootstrap, or --map source_cluster:NAME=any",
};

const IPV6_GROUPED =
  "counted by client address (CF-Connecting-IP); Envoy counts each IPv6 address apart, Sluice's identity: ip one budget per /64 unless IPV6_PREFIX=128";

/** One (key, value) step of a descriptor chain, and where it is. */
export interface Step {
  readonly key: string;
  readonly value: string | null;
  readonly line: number;
  /**
   * A step without a value: the values its siblings of the same key hold (`k: a` beside `k`). The service looks up
   * `key_value` (or a wildcard) before `key`, so a request with one of these goes down that sibling, never this step.
   */
  readonly notWith?: readonly string[];
  /** `share_threshold`: a wildcard value keeps one counter for every value it matches, not one per value. */
  readonly shared?: boolean;
}

/** A descriptor chain as a rule: its match, its key (`null`: the match's identity), what the report says of it. */
export interface ChainRule {
  readonly match: DraftRule["match"];
  readonly key: DraftRule["key"] | null;
  /** Fields the key needs (`key_missing: skip`: Envoy sends no descriptor for a request without the header). */
  readonly fields: readonly [string, string][];
  readonly notes: string[];
}

// long: each descriptor step's meaning, checked in chain order with its own message
/**
 * The rule a descriptor chain becomes through the mapping, or `null` (reported as left out) when it cannot be said:
 * a valued descriptor nobody mapped, a wildcard value, a limit for one caller.
 */
export function matchOf(
  steps: readonly Step[],
  chainText: string,
  where: string,
  mapping: EnvoyMapping,
  report: ReportItem[],
): ChainRule | null {
  const parts: { part: string; identity: string | null }[] = [];
  let route: string | readonly string[] | undefined;
  let plan: string | undefined;
  const notes: string[] = [];
  const leftOut = (message: string) => {
    report.push({ where, kind: "left out", message: `${chainText}: ${message}` });
    return null;
  };
  // What a step's meaning says differs (approximate), once per chain.
  const shadowed = (note: string | undefined) => {
    if (note === undefined || notes.includes(`approximate: ${note}`)) return;
    report.push({ where, kind: "approximate", message: `${chainText}: ${note}` });
    notes.push(`approximate: ${note}`);
  };
  const conditions: MatchCondition[] = [];
  const addresses: string[] = [];
  for (const step of steps) {
    // A value of the client address (`remote_address`, `masked_remote_address`'s masked range): `match.address`.
    if (step.value !== null && addressValue(mapping, step.key, step.value)) {
      addresses.push(step.value);
      continue;
    }
    // A value of a request header's descriptor is a `match.header` on it (one counter per value: also a key part).
    const valued = step.value === null ? undefined : mapping.get(`${step.key}:${step.value}`);
    const header = valued === undefined ? headerOf(mapping.get(step.key)) : null;
    if (step.value?.includes("*") === true) {
      // The service reads any `*` in a value as a wildcard (config_impl.go `wildcardMatch`), not only a trailing one.
      if (header === null) {
        return leftOut(
          `the wildcard value ${step.key}=${step.value} matches values by a pattern; ${step.key} is not a request header (--map ${step.key}=header:NAME if it is), so no match.header can test it`,
        );
      }
      conditions.push(wildcardCondition(header, step.value));
      if (step.shared !== true) parts.push({ part: `{ header: ${header} }`, identity: null });
      continue;
    }
    if (step.value !== null && header !== null) {
      conditions.push(wildcardCondition(header, step.value));
      continue;
    }
    const meaning =
      (step.value === null
        ? mapping.get(step.key)
        : (mapping.get(`${step.key}:${step.value}`) ??
          mapping.get(`${step.key}:*`) ??
          perCaller(mapping.get(step.key)))) ?? mapping.get("*");
    const fact = meaning === undefined || meaning === null ? ROUTE_FACTS[step.key] : undefined;
    if (fact !== undefined) return leftOut(`${step.key} is ${fact}`);
    if (step.value === null && meaning === undefined) {
      return leftOut(`no meaning for descriptor key ${step.key}: give --map ${step.key}=${MEANINGS.split(", any")[0]}`);
    }
    if (meaning === null || meaning === undefined) {
      return leftOut(
        `${step.key}=${step.value} comes from an Envoy route action, which this file does not show: give --envoy FILE with Envoy's routes, or --map ${step.key}:${step.value}=route:METHOD /path, plan:NAME or any`,
      );
    }
    if (meaning.kind === "refused") return leftOut(`${step.key}=${step.value ?? "*"}: ${meaning.why}`);
    if (meaning.kind === "identity" || meaning.kind === "part") {
      if (step.value !== null) {
        return leftOut(
          `a limit for one ${step.key} value (${step.value}): ${step.key} is the caller's ${meaning.kind === "identity" ? meaning.identity : "identity"}, which a rule does not name by value (the rule file would hold it); give that caller its own limits with an account override (sluice accounts)`,
        );
      }
      if (meaning.routes !== undefined) {
        route = route === undefined ? meaning.routes : bothRoutes(route, meaning.routes);
        if (route.length === 0) return leftOut(`${step.key}: its routes and the chain's others share no request`);
      }
      shadowed(meaning.note);
      if (meaning.kind === "identity" && meaning.identity === "ip") {
        // Envoy's descriptor holds the whole address; `identity: ip` groups IPv6 by IPV6_PREFIX (as NGINX's import says).
        report.push({ where, kind: "note", message: `${chainText}: ${IPV6_GROUPED}` });
      }
      parts.push(
        meaning.kind === "identity"
          ? { part: meaning.identity, identity: meaning.identity }
          : { part: meaning.part, identity: null },
      );
    } else if (meaning.kind === "route") {
      conditions.push(...(meaning.conditions ?? []));
      shadowed(meaning.note);
      route = route === undefined ? meaning.route : bothRoutes(route, meaning.route);
      if (route.length === 0)
        return leftOut(`${step.key}=${step.value}: its routes and the chain's others share no request`);
    } else if (meaning.kind === "plan") plan = meaning.plan;
    else if ((meaning.conditions?.length ?? 0) > 0 || meaning.note !== undefined) {
      conditions.push(...(meaning.conditions ?? []));
      shadowed(meaning.note);
    } else if (step.key === "generic_key" && mapping.get(`generic_key:${step.value}`) === undefined) {
      const message = `generic_key=${step.value} is set by Envoy's route actions: imported for every request (give --map generic_key:${step.value}=route:METHOD /path if only some routes set it)`;
      report.push({ where, kind: "note", message: `${chainText}: ${message}` });
      notes.push(message);
    }
  }
  if (addresses.length > 1) return leftOut("two client address values in one chain: only the clients in both");
  const base = {
    ...(plan === undefined ? {} : { plan }),
    ...(route === undefined ? {} : { route }),
    ...conditionFields(conditions),
    ...(addresses.length === 0 ? {} : { address: addresses }),
  };
  if (parts.length === 1 && parts[0]!.identity !== null) {
    return { match: { ...base, identity: parts[0]!.identity }, key: null, fields: [], notes };
  }
  if (parts.length === 0) {
    notes.push("one budget for every client (key: global), as the service keeps one counter for the descriptor");
    return { match: base, key: "global", fields: [], notes };
  }
  const byHeader = parts.some((p) => p.part.startsWith("{ header:"));
  return {
    match: base,
    key: parts.map((p) => p.part),
    fields: byHeader ? [["key_missing", "skip"]] : [],
    notes,
  };
}

/** The requests two steps of one chain both send: their routes' common part (one route, or a list). */
function bothRoutes(a: string | readonly string[], b: string | readonly string[]): string | readonly string[] {
  const { routes } = intersectRoutes([a].flat(), [b].flat());
  return routes.length === 1 ? routes[0]! : routes;
}

/** The request header a descriptor key reads (`request_headers`, or `--map KEY=header:NAME`), or `null`. */
export function headerOf(meaning: Meaning | undefined): string | null {
  if (meaning?.kind === "part") return meaning.header ?? null;
  if (meaning?.kind === "identity" && meaning.header !== undefined) return meaning.header;
  return null;
}

/**
 * A descriptor value as a header test: a plain value equal, `*` any value (with share_threshold), `foo*` a prefix, `*foo` a suffix, others a
 * regular expression: each `*` any run of characters, the rest literal, the whole value (the service's
 * `wildcardMatch`: the value starts with the first part, ends with the last, holds the others in order between).
 */
export function wildcardCondition(name: string, value: string): MatchCondition {
  const pieces = value.split("*");
  const one = { in: "header" as const, name, ignoreCase: false, not: false };
  if (pieces.length === 1) return { ...one, test: "equals", value };
  if (pieces.every((p) => p === "")) return { ...one, test: "present", value: "" };
  if (pieces.length === 2 && pieces[1] === "") return { ...one, test: "prefix", value: pieces[0]! };
  if (pieces.length === 2 && pieces[0] === "") return { ...one, test: "suffix", value: pieces[1]! };
  return { ...one, test: "matches", value: `^${pieces.map(escapeRegex).join(".*")}$` };
}
