/**
 * A rule's key: whose budget a request spends, as a list of parts whose values make one tuple (`key:` in a rule
 * file; `match.identity: X` is the short spelling of `key: [X]` with `key_missing: skip`). docs/rules.md, "Keys",
 * has the table of parts. This module reads and prints the rule-file form; src/request/key.ts reads the parts'
 * values from a request.
 *
 *   key: global                       # one state for every caller
 *   key: [ip, { header: X-Tenant-Id }] # a tuple
 *   key:
 *     - ip: { v4: 24, v6: 56 }        # the client address, masked
 *     - cookie: session
 */
import { closest } from "./closest.ts";
import { describe, type Raw } from "./raw.ts";
import type { RuleErrors } from "./read.ts";

/** One part of a key. Every variant is plain JSON (the resolved rules are serialised for the Worker). */
export type KeyPart =
  /** The verified API key; a caller without one follows the rule's `unverified`. */
  | { readonly kind: "api_key" }
  /** The client address (`CF-Connecting-IP`), IPv4 masked to `v4` bits, IPv6 to `v6` (`null`: `IPV6_PREFIX`). */
  | { readonly kind: "ip"; readonly v4: number; readonly v6: number | null }
  /** The trusted user header (`USER_HEADER`). */
  | { readonly kind: "user" }
  /** A request header (`name` lower-case), a cookie or a query parameter (names as written: case matters). */
  | { readonly kind: "header" | "cookie" | "query"; readonly name: string }
  /** The method; the rule's matched route; the canonical path; the host. */
  | { readonly kind: "method" | "route" | "path" | "host" }
  /** A field of `request.cf`: the client's ASN, its country, the data center, the JA4 fingerprint. */
  | { readonly kind: "asn" | "country" | "colo" | "ja4" }
  /** A constant string. */
  | { readonly kind: "const"; readonly value: string };

export type KeyPartKind = KeyPart["kind"];

/** What a request without a value for a part gets: the rule skips it, counts the part as empty, or refuses it (400). */
export type KeyMissing = "skip" | "empty" | "refuse";
export const KEY_MISSING: readonly KeyMissing[] = ["skip", "empty", "refuse"];

/** The parts written as a bare word. */
const BARE: readonly KeyPartKind[] = [
  "api_key",
  "ip",
  "user",
  "method",
  "route",
  "path",
  "host",
  "asn",
  "country",
  "colo",
  "ja4",
];
/** The parts written as `{ <kind>: <value> }`. */
const NAMED: readonly KeyPartKind[] = ["ip", "header", "cookie", "query", "const"];
const ALL_WORDS: readonly string[] = [...new Set([...BARE, ...NAMED, "global"])];

/**
 * Parts whose value the client picks freely, so each new value is a fresh budget (a header, a cookie, a query
 * value, the path, the TLS fingerprint), and parts it cannot rotate at will (a verified key, its address, the
 * trusted user, where Cloudflare sees it from). A key of the first kind without one of the second draws a warning.
 */
const CLIENT_CHOSEN: ReadonlySet<KeyPartKind> = new Set(["header", "cookie", "query", "path", "ja4"]);
const ANCHORS: ReadonlySet<KeyPartKind> = new Set(["api_key", "ip", "user", "asn", "country", "colo"]);

/** Header names the gateway already reads as identities: a key names them by their part instead. */
const IDENTITY_HEADERS: Readonly<Record<string, string>> = {
  authorization: "api_key (the verified key)",
  "x-api-key": "api_key (the verified key)",
  "cf-connecting-ip": "ip",
  cookie: "{ cookie: NAME }",
};

export const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$/;
export const COOKIE_OR_QUERY_NAME = /^[\x21-\x7e]{1,64}$/;
const MAX_CONST = 64;
const MAX_PARTS = 8;

/** `key:` from a rule file: `global`, one part, or a list of parts; `undefined` after reporting what is wrong. */
export function readKey(v: Raw | undefined, e: RuleErrors): readonly KeyPart[] | undefined {
  if (v === "global") return [];
  const list: Raw[] = Array.isArray(v) ? v : [v ?? null];
  if (Array.isArray(v) && v.length === 0) {
    e.add("key", "must name at least one part, or be global (one budget for every caller)");
    return undefined;
  }
  if (list.length > MAX_PARTS) {
    e.add("key", `at most ${MAX_PARTS} parts, got ${list.length}`);
    return undefined;
  }
  const parts: KeyPart[] = [];
  let ok = true;
  list.forEach((raw, i) => {
    const part = readPart(raw, Array.isArray(v) ? `key[${i}]` : "key", e);
    if (part === undefined) ok = false;
    else parts.push(part);
  });
  if (!ok) return undefined;
  const seen = new Set<string>();
  for (const [i, p] of parts.entries()) {
    const label = partLabel(p);
    if (seen.has(label)) {
      e.add(`key[${i}]`, `${label} is already a part of this key`);
      ok = false;
    }
    seen.add(label);
  }
  return ok ? parts : undefined;
}

// long: one branch per kind of part, each with its own message
function readPart(raw: Raw, field: string, e: RuleErrors): KeyPart | undefined {
  if (typeof raw === "string") {
    if ((BARE as readonly string[]).includes(raw)) return bare(raw as KeyPartKind);
    if (raw === "global") {
      e.add(field, "global is the whole key (key: global), not a part of one");
      return undefined;
    }
    if ((NAMED as readonly string[]).includes(raw)) {
      e.add(field, `${raw} needs a value: { ${raw}: ${raw === "const" ? "VALUE" : "NAME"} }`);
      return undefined;
    }
    e.add(field, unknownPart(raw));
    return undefined;
  }
  if (!(raw instanceof Map) || raw.size !== 1) {
    e.add(
      field,
      `must be a part (${BARE.join(", ")}) or one of { header | cookie | query | const | ip: ... }, got ${describe(raw)}`,
    );
    return undefined;
  }
  const [kind, value] = [...raw][0]!;
  const at = `${field}.${kind}`;
  switch (kind) {
    case "ip":
      return readMask(value, at, e);
    case "header": {
      if (typeof value !== "string" || !HEADER_NAME.test(value)) {
        e.add(at, `must be a header name, got ${describe(value)}`);
        return undefined;
      }
      const name = value.toLowerCase();
      const instead = IDENTITY_HEADERS[name];
      if (instead !== undefined) {
        e.add(at, `${value} is read by the gateway; key on ${instead} instead`);
        return undefined;
      }
      return { kind: "header", name };
    }
    case "cookie":
    case "query":
      if (typeof value !== "string" || !COOKIE_OR_QUERY_NAME.test(value)) {
        e.add(at, `must be a ${kind} name (printable, no spaces, at most 64 characters), got ${describe(value)}`);
        return undefined;
      }
      return { kind, name: value };
    case "const":
      if (typeof value !== "string" && typeof value !== "bigint") {
        e.add(at, `must be a string, got ${describe(value)}`);
        return undefined;
      }
      if (String(value).length > MAX_CONST || String(value) === "") {
        e.add(at, `must be 1 to ${MAX_CONST} characters, got ${describe(value)}`);
        return undefined;
      }
      return { kind: "const", value: String(value) };
    default:
      if ((BARE as readonly string[]).includes(kind)) {
        e.add(field, `${kind} takes no value: write it as a bare word (- ${kind})`);
      } else e.add(field, unknownPart(kind));
      return undefined;
  }
}

function unknownPart(word: string): string {
  const guess = closest(word, ALL_WORDS);
  return `unknown key part ${JSON.stringify(word)}${guess === null ? "" : `; did you mean "${guess}"?`} (parts: ${BARE.join(", ")}, header, cookie, query, const)`;
}

function bare(kind: KeyPartKind): KeyPart {
  if (kind === "ip") return { kind: "ip", v4: 32, v6: null };
  return { kind } as KeyPart;
}

/** `ip: { v4: 24, v6: 56 }`: prefix lengths; an absent one is the whole IPv4 address / `IPV6_PREFIX`. */
function readMask(value: Raw, at: string, e: RuleErrors): KeyPart | undefined {
  if (!(value instanceof Map)) {
    e.add(at, `must be { v4: BITS, v6: BITS }, got ${describe(value)}`);
    return undefined;
  }
  let ok = true;
  const bits = (name: "v4" | "v6", max: number): number | null => {
    if (!value.has(name)) return null;
    const b = value.get(name);
    if (typeof b === "bigint" && b >= 1n && b <= BigInt(max)) return Number(b);
    e.add(`${at}.${name}`, `must be a prefix length from 1 to ${max}, got ${describe(b)}`);
    ok = false;
    return null;
  };
  for (const key of value.keys()) {
    if (key === "v4" || key === "v6") continue;
    const guess = closest(key, ["v4", "v6"]);
    e.add(`${at}.${key}`, `unknown key${guess === null ? " (ip takes v4 and v6)" : `; did you mean "${guess}"?`}`);
    ok = false;
  }
  const v4 = bits("v4", 32) ?? 32;
  const v6 = bits("v6", 128);
  return ok ? { kind: "ip", v4, v6 } : undefined;
}

/** A part as a rule file writes it, and as messages and traces name it: `ip/24/56`, `header:x-tenant-id`. */
export function partLabel(p: KeyPart): string {
  switch (p.kind) {
    case "ip":
      return p.v4 === 32 && p.v6 === null ? "ip" : `ip/${p.v4}/${p.v6 ?? "IPV6_PREFIX"}`;
    case "header":
    case "cookie":
    case "query":
      return `${p.kind}:${p.name}`;
    case "const":
      return `const:${p.value}`;
    default:
      return p.kind;
  }
}

/** A key in rule-file terms, for `sluice plan` and the admin API: `global`, `ip, header:x-tenant-id`. */
export function printKey(parts: readonly KeyPart[] | null): string {
  if (parts === null) return "none";
  return parts.length === 0 ? "global" : parts.map(partLabel).join(", ");
}

/**
 * The warning for a key a client can rotate to get a fresh budget per value, or `null`: it has a client-chosen part
 * and nothing the client cannot rotate (const-only and global keys are fine: one budget).
 */
export function clientChosenWarning(parts: readonly KeyPart[]): string | null {
  const chosen = parts.filter((p) => CLIENT_CHOSEN.has(p.kind));
  if (chosen.length === 0 || parts.some((p) => ANCHORS.has(p.kind))) return null;
  return (
    `the client picks ${chosen.map(partLabel).join(", ")} freely, so each new value opens a fresh budget; add a ` +
    "part it cannot rotate (api_key, ip, user, asn, country, colo) or say key_client_chosen: accept"
  );
}

/** Whether a part is one the client rotates freely (traces hash nothing by it; the docs table says so). */
export function clientChosen(kind: KeyPartKind): boolean {
  return CLIENT_CHOSEN.has(kind);
}
