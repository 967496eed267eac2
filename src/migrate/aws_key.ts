/**
 * What an AWS WAF rate-based statement counts by (AggregateKeyType, CustomKeys, ForwardedIPConfig) as a Sluice key:
 * IP as `identity: ip`, CONSTANT as `key: global`, CUSTOM_KEYS as `key:` parts. AWS leaves a request missing any key
 * component out of the rule ("Web requests that are missing any of the components specified in the aggregation keys
 * are omitted from the rate-based rule evaluation and handling", API reference, RateBasedStatement), which is
 * `key_missing: skip`. Each finding is at the key it is about, for aws_import.ts to report.
 */
import { COOKIE_OR_QUERY_NAME, clientChosenWarning, HEADER_NAME, type KeyPart } from "../rules/key.ts";
import {
  AwsImportError,
  here,
  isObject,
  isObjects,
  isString,
  type Obj,
  type Place,
  required,
  soleKey,
  transformationsOf,
} from "./aws_file.ts";
import type { Finding, Findings } from "./cloudflare_count.ts";

export interface AwsKey {
  /** `ip` alone: `match.identity: ip`. */
  readonly identity: "ip" | null;
  /** `global`, or the parts in rule-file flow style; `null` with an identity. */
  readonly key: "global" | readonly string[] | null;
  /** `key_client_chosen: accept`: AWS counted every value of a client-chosen part too. */
  readonly clientChosen: boolean;
}

const IPV6 = "Sluice counts an IPv6 client by its /64 (IPV6_PREFIX); AWS by its whole address";

/** The key of the rate-based statement `rbs` (at `path`). */
export function awsKeyOf(place: Place, rbs: Obj, path: string, found: Findings): AwsKey {
  const type = required(place, rbs, "AggregateKeyType", path, isString, "a string");
  const at = here(place, rbs, "AggregateKeyType");
  if (type === "CONSTANT") {
    if (!isObject(rbs.ScopeDownStatement))
      throw new AwsImportError(
        `${at}: ${path}: AggregateKeyType CONSTANT needs a ScopeDownStatement (AWS refuses it without)`,
      );
    return { identity: null, key: "global", clientChosen: false };
  }
  if (type === "IP" || type === "FORWARDED_IP") {
    if (type === "FORWARDED_IP") forwarded(place, rbs, path, at, found);
    found.notes.push({ message: IPV6, at });
    return { identity: "ip", key: null, clientChosen: false };
  }
  if (type !== "CUSTOM_KEYS")
    throw new AwsImportError(
      `${at}: ${path}.AggregateKeyType: IP, FORWARDED_IP, CUSTOM_KEYS or CONSTANT, got ${JSON.stringify(type)}`,
    );
  const keys = required(place, rbs, "CustomKeys", path, isObjects, "a list of objects");
  if (keys.length === 0 || keys.length > 5)
    throw new AwsImportError(`${here(place, rbs, "CustomKeys")}: ${path}.CustomKeys: 1 to 5 keys, got ${keys.length}`);
  const parts: KeyPart[] = [];
  keys.forEach((k, i) => {
    const part = customPart(place, k, `${path}.CustomKeys[${i}]`, rbs, found);
    if (part !== null && !parts.some((p) => printPart(p) === printPart(part))) parts.push(part);
  });
  if (parts.some((p) => p.kind === "ip")) found.notes.push({ message: IPV6, at: here(place, rbs, "CustomKeys") });
  if (parts.length === 1 && parts[0]!.kind === "ip") return { identity: "ip", key: null, clientChosen: false };
  return { identity: null, key: parts.map(printPart), clientChosen: clientChosenWarning(parts) !== null };
}

/** FORWARDED_IP, or a ForwardedIP key: Sluice counts by the address Cloudflare saw connect. */
function forwarded(place: Place, rbs: Obj, path: string, at: string, found: Findings): void {
  const config = required(place, rbs, "ForwardedIPConfig", path, isObject, "an object");
  const header = required(place, config, "HeaderName", `${path}.ForwardedIPConfig`, isString, "a string");
  found.approximate.push({
    message: `AWS counts by the first address in ${header}; Sluice by CF-Connecting-IP (the address that connected to Cloudflare), never a forwarded header: the same client when ${header} is set by a proxy you run, another when a client can set it`,
    at,
  });
}

const LEFT_OUT: Readonly<Record<string, string>> = {
  QueryString: "the whole query string: a key part is one query argument (QueryArgument)",
  LabelNamespace: "labels are set by AWS WAF's other rules, which Sluice does not see",
  JA3Fingerprint: "Sluice keys have no JA3 part (ja4 is one)",
};

/** One CustomKeys entry as a part, or `null` with its finding. */
// long: one branch per kind of custom key, each with its own message
function customPart(place: Place, key: Obj, path: string, rbs: Obj, found: Findings): KeyPart | null {
  const [kind, body] = soleKey(place, key, path, "a custom key");
  const at = here(place, key, kind);
  const say = (list: Finding[], message: string) => list.push({ message, at });
  switch (kind) {
    case "IP":
      return { kind: "ip", v4: 32, v6: null };
    case "ForwardedIP":
      forwarded(place, rbs, path, at, found);
      return { kind: "ip", v4: 32, v6: null };
    case "HTTPMethod":
      return { kind: "method" };
    case "ASN":
      return { kind: "asn" };
    case "JA4Fingerprint":
      say(
        found.notes,
        "Cloudflare gives the JA4 fingerprint with Bot Management only: without it every request lacks the part and the rule skips it",
      );
      return { kind: "ja4" };
    case "UriPath":
      say(
        found.approximate,
        "Sluice counts the canonical path (decoded, lower-case, dot segments gone): spellings AWS may count apart share one budget",
      );
      return { kind: "path" };
    case "Header":
    case "Cookie":
    case "QueryArgument":
      return namedPart(place, kind, body, `${path}.${kind}`, at, found);
    default:
      say(found.leftOut, `the custom key ${kind}: ${LEFT_OUT[kind] ?? "not one Sluice has a key part for"}`);
      return null;
  }
}

/** A Header, Cookie or QueryArgument key: its part, its transformations approximate (Sluice counts the value as sent). */
function namedPart(
  place: Place,
  kind: string,
  body: unknown,
  path: string,
  at: string,
  found: Findings,
): KeyPart | null {
  if (!isObject(body)) throw new AwsImportError(`${at}: ${path}: must be an object`);
  const raw = required(place, body, "Name", path, isString, "a string");
  const part = kind === "Header" ? "header" : kind === "Cookie" ? "cookie" : "query";
  const name = part === "header" ? raw.toLowerCase() : raw;
  const say = (list: Finding[], message: string) => list.push({ message, at });
  for (const t of transformationsOf(place, body, path).filter((t) => t.type !== "NONE"))
    found.approximate.push({
      message: `AWS counts ${part} ${name} after ${t.type}; Sluice counts the value as sent, so values AWS counts as one are counted apart (the client chooses this value anyway)`,
      at: t.at,
    });
  if (part === "header" && (name === "authorization" || name === "x-api-key")) {
    say(
      found.approximate,
      `AWS counts the ${name} header as sent; Sluice counts the verified API key, and a caller without a known one by its address`,
    );
    return { kind: "api_key" };
  }
  if (part === "header" && name === "cf-connecting-ip") return { kind: "ip", v4: 32, v6: null };
  if (!(part === "header" ? HEADER_NAME : COOKIE_OR_QUERY_NAME).test(name) || name === "cookie") {
    say(found.leftOut, `the custom key ${kind} ${JSON.stringify(raw)}: not a ${part} name a key part takes`);
    return null;
  }
  return { kind: part, name };
}

export function printPart(p: KeyPart): string {
  if (p.kind === "header" || p.kind === "cookie" || p.kind === "query")
    return `{ ${p.kind}: ${/^[A-Za-z0-9_.-]+$/.test(p.name) ? p.name : JSON.stringify(p.name)} }`;
  return p.kind;
}
