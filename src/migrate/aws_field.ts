/**
 * One AWS WAF match statement (ByteMatchStatement, RegexMatchStatement, SizeConstraintStatement) as a Sluice match:
 * a route for the path (UriPath) and the method, a condition for a header (SingleHeader), a query argument
 * (SingleQueryArgument) or one cookie (Cookies with one IncludedCookies name, MatchScope VALUE). Text transformations
 * that Sluice says too are read (LOWERCASE as `ignore_case`; on the path, which Sluice matches decoded, lower-case
 * and normalized, URL_DECODE and NORMALIZE_PATH too); any other is refused, so no test is said looser than AWS's.
 */
import { COOKIE_OR_QUERY_NAME, HEADER_NAME } from "../rules/key.ts";
import { escapeRegex, regexError } from "../rules/match_conditions.ts";
import { compileRoute } from "../rules/route.ts";
import type { MatchCondition } from "../rules/types.ts";
import type { AddressScope } from "./address_scope.ts";
import {
  field,
  here,
  isInteger,
  isObject,
  isString,
  isStrings,
  type Obj,
  type Place,
  required,
  soleKey,
  type Transformation,
  transformationsOf,
} from "./aws_file.ts";
import { emptyTest } from "./empty_test.ts";

/** Something that differs (`approximate`) or is worth knowing (`note`), at the value it is about. */
export interface Finding {
  readonly kind: "approximate" | "note";
  readonly message: string;
  readonly at: string;
}

/** A match: `routes` null for any request. */
export interface Scope extends AddressScope {
  readonly routes: readonly string[] | null;
  readonly except: readonly string[];
  readonly conditions: readonly MatchCondition[];
  readonly notes: readonly Finding[];
}

/** A match, or the part that cannot be said and where it is. */
export type Scoped = Scope | { readonly refused: string; readonly at: string };

type Named = { kind: "header" | "query" | "cookie"; name: string };
type Target = { kind: "path" } | { kind: "method" } | Named;

const NONE: Scope = { routes: null, except: [], conditions: [], notes: [] };

/** Fields a rule cannot test, and why. */
const UNREAD: Readonly<Record<string, string>> = {
  QueryString: "the whole query string: a condition tests one query argument (SingleQueryArgument)",
  AllQueryArguments: "every query argument at once: a condition tests one (SingleQueryArgument)",
  Headers: "several headers at once: a condition tests one (SingleHeader)",
  HeaderOrder: "the order of the headers, which a Worker does not see",
  Body: "the body: rules do not read it",
  JsonBody: "the JSON body: rules do not read it",
  UriFragment: "the fragment, which a browser does not send",
  JA3Fingerprint: "the JA3 fingerprint: Sluice knows JA4 only",
  JA4Fingerprint: "the JA4 fingerprint as AWS computes it (a key can count by Cloudflare's ja4)",
};

/** The statement `kind` with its `body`, at `path` (`at` its place), as a match or why not. */
export function fieldTest(place: Place, kind: string, body: Obj, path: string, at: string): Scoped {
  const ftm = required(place, body, "FieldToMatch", path, isObject, "an object");
  const [fkind, fbody] = soleKey(place, ftm, `${path}.FieldToMatch`, "FieldToMatch");
  const where = `${path}.FieldToMatch.${fkind}`;
  const target = targetOf(place, fkind, fbody, where);
  if (typeof target === "string") return { refused: `${where}: ${target}`, at: here(place, ftm, fkind) };
  const transforms = transformationsOf(place, body, path);
  if (kind === "SizeConstraintStatement") return sizeTest(place, body, path, at, target, transforms);
  const value =
    kind === "RegexMatchStatement"
      ? required(place, body, "RegexString", path, isString, "a string")
      : searchString(place, body, path);
  if (typeof value !== "string") return value;
  const constraint =
    kind === "RegexMatchStatement"
      ? "REGEX"
      : required(place, body, "PositionalConstraint", path, isString, "a string");
  const refuse = (why: string): Scoped => ({ refused: `${path}: ${why}`, at });
  const lower = transforms.some((t) => t.type === "LOWERCASE");
  const allowed = target.kind === "path" ? PATH_TRANSFORMS : VALUE_TRANSFORMS;
  const other = transforms.find((t) => !allowed.has(t.type));
  if (other !== undefined)
    return {
      refused: `${path}: TextTransformations ${other.type}: Sluice compares the ${target.kind === "path" ? "canonical path" : "value as sent"}, so it cannot say this test`,
      at: other.at,
    };
  if (lower && value !== value.toLowerCase())
    return refuse(`after LOWERCASE, ${JSON.stringify(value)} (with capitals) never matches`);
  const scoped =
    target.kind === "path"
      ? pathTest(constraint, value, lower, at, refuse)
      : target.kind === "method"
        ? methodTest(constraint, value, lower, refuse)
        : conditionTest(target, constraint, value, lower, at, refuse);
  const raw = body.SearchString;
  if ("refused" in scoped || typeof raw !== "string" || raw === value) return scoped;
  const message = `SearchString ${JSON.stringify(raw)} read as base64 (as aws wafv2 get-web-acl prints it): ${JSON.stringify(value)}`;
  return { ...scoped, notes: [...scoped.notes, { kind: "note", message, at: here(place, body, "SearchString") }] };
}

const VALUE_TRANSFORMS = new Set(["NONE", "LOWERCASE"]);
const PATH_TRANSFORMS = new Set(["NONE", "LOWERCASE", "URL_DECODE", "URL_DECODE_UNI", "NORMALIZE_PATH"]);

function targetOf(place: Place, kind: string, body: unknown, path: string): Target | string {
  if (kind === "UriPath") return { kind: "path" };
  if (kind === "Method") return { kind: "method" };
  if (!isObject(body)) return UNREAD[kind] ?? "not a field the import reads";
  if (kind === "SingleHeader" || kind === "SingleQueryArgument") {
    const raw = required(place, body, "Name", path, isString, "a string");
    const name = kind === "SingleHeader" ? raw.toLowerCase() : raw;
    if (!(kind === "SingleHeader" ? HEADER_NAME : COOKIE_OR_QUERY_NAME).test(name))
      return `${JSON.stringify(raw)} is not a name a condition takes`;
    return { kind: kind === "SingleHeader" ? "header" : "query", name };
  }
  if (kind === "Cookies") {
    const pattern = required(place, body, "MatchPattern", path, isObject, "an object");
    const names = field(place, pattern, "IncludedCookies", `${path}.MatchPattern`, isStrings, "a list of names");
    const scope = field(place, body, "MatchScope", path, isString, "a string");
    if (names?.length !== 1 || scope !== "VALUE")
      return "a cookie condition tests one cookie's value: MatchPattern.IncludedCookies with one name, MatchScope VALUE";
    if (!COOKIE_OR_QUERY_NAME.test(names[0]!)) return `${JSON.stringify(names[0])} is not a cookie name`;
    return { kind: "cookie", name: names[0]! };
  }
  return UNREAD[kind] ?? "not a field the import reads";
}

/**
 * The text searched for: `SearchString`, or CloudFormation's `SearchStringBase64` decoded. The API types
 * SearchString as base64-encoded binary, which `aws wafv2 get-web-acl` prints encoded, while the console's rule JSON
 * and CloudFormation give the text: a SearchString that is canonical base64 of printable text is read decoded, and
 * the report says so (a path, which starts with `/`, never decodes to printable text).
 */
function searchString(place: Place, body: Obj, path: string): string | { refused: string; at: string } {
  const b64 = field(place, body, "SearchStringBase64", path, isString, "a string");
  const text = b64 ?? required(place, body, "SearchString", path, isString, "a string");
  const decoded = printableBase64(text);
  if (b64 !== undefined && decoded === null)
    return {
      refused: `${path}.SearchStringBase64: not base64 of printable text`,
      at: here(place, body, "SearchStringBase64"),
    };
  return decoded ?? text;
}

export function printableBase64(text: string): string | null {
  if (text.length === 0 || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(text)) return null;
  const bytes = Buffer.from(text, "base64");
  if (bytes.toString("base64") !== text || bytes.some((b) => b < 0x20 || b > 0x7e)) return null;
  return bytes.toString("latin1");
}

/** EXACTLY `/login` is `* /login`, STARTS_WITH `/api/` is `* /api/**`, ENDS_WITH `.php` is `* /**.php`. */
function pathTest(constraint: string, value: string, lower: boolean, at: string, refuse: (w: string) => Scoped) {
  const v = value.toLowerCase();
  let pattern: string;
  if (constraint === "EXACTLY" || constraint === "STARTS_WITH") {
    if (!v.startsWith("/"))
      return refuse(`a path starts with /, so ${constraint} ${JSON.stringify(value)} never matches`);
    pattern = constraint === "EXACTLY" ? v : `${v}**`;
  } else if (constraint === "ENDS_WITH") {
    if (v.includes("/")) return refuse("a suffix route ends the path's last segment, so its text holds no /");
    pattern = `/**${v}`;
  } else return refuse(`the path is matched with EXACTLY, STARTS_WITH or ENDS_WITH, not ${constraint}`);
  const route = compileRoute(`* ${pattern}`);
  if ("error" in route || v.includes("*"))
    return refuse(`${JSON.stringify(value)} cannot be a route (${"error" in route ? route.error : "a literal *"})`);
  const notes: Finding[] =
    !lower && value !== v
      ? [
          {
            kind: "approximate",
            message: `Sluice matches ${value} ignoring case (unless PATH_CASE_SENSITIVE); AWS as written`,
            at,
          },
        ]
      : [];
  return { ...NONE, routes: [route.source], notes };
}

/** EXACTLY `POST` (or `post` after LOWERCASE) is the route `POST /**`. */
function methodTest(constraint: string, value: string, lower: boolean, refuse: (w: string) => Scoped): Scoped {
  if (constraint !== "EXACTLY" || !(lower ? /^[a-z]+$/ : /^[A-Z]+$/).test(value))
    return refuse("the method is matched with EXACTLY and its name in capitals (lower-case after LOWERCASE)");
  return { ...NONE, routes: [`${value.toUpperCase()} /**`] };
}

const TESTS: Readonly<Record<string, MatchCondition["test"]>> = {
  EXACTLY: "equals",
  STARTS_WITH: "prefix",
  ENDS_WITH: "suffix",
  CONTAINS: "contains",
  CONTAINS_WORD: "matches",
  REGEX: "matches",
};

/**
 * A header, query argument or cookie test. CONTAINS_WORD needs a SearchString of letters, digits and `_` found
 * between non-word characters or the ends (AWS's PositionalConstraint), which is `\bword\b`. A query argument's name
 * "isn't case sensitive" (SingleQueryArgument) where Sluice's is: approximate.
 */
function conditionTest(
  target: Named,
  constraint: string,
  value: string,
  lower: boolean,
  at: string,
  refuse: (w: string) => Scoped,
): Scoped {
  const test = TESTS[constraint];
  if (test === undefined) return refuse(`PositionalConstraint ${constraint} is not one the import reads`);
  if (value === "") return refuse("an empty SearchString: a condition compares with a non-empty text");
  if (constraint === "CONTAINS_WORD" && !/^\w+$/.test(value))
    return refuse("CONTAINS_WORD needs a SearchString of letters, digits and _");
  const text = constraint === "CONTAINS_WORD" ? `\\b${escapeRegex(value)}\\b` : value;
  if (test === "matches" && regexError(text, lower) !== null)
    return refuse(`not a JavaScript regular expression: ${regexError(text, lower)}`);
  const condition: MatchCondition = {
    in: target.kind,
    name: target.name,
    test,
    value: text,
    ignoreCase: lower,
    not: false,
  };
  const notes: Finding[] = [];
  if (constraint === "REGEX")
    notes.push({
      kind: "approximate",
      message:
        "AWS runs the regex as PCRE, Sluice as a JavaScript regex: the same for common patterns, not for every one",
      at,
    });
  if (target.kind === "query")
    notes.push({
      kind: "approximate",
      message: `AWS finds query argument ${target.name} under any spelling of its name; Sluice by the name as written`,
      at,
    });
  return { ...NONE, conditions: [condition], notes };
}

/**
 * SizeConstraintStatement `GT 0` (or `GE 1`) of a header, query argument or cookie: it is sent with a value. AWS
 * fails a value sent empty (size 0) and one not sent ("evaluates the request as not matching") alike, so the test
 * is "not empty", a missing value read as empty (empty_test.ts); its NOT (AWS's own advice for limiting requests
 * without a header) is "empty", which a request without the value passes.
 */
function sizeTest(place: Place, body: Obj, path: string, at: string, target: Target, transforms: Transformation[]) {
  const op = required(place, body, "ComparisonOperator", path, isString, "a string");
  const size = required(place, body, "Size", path, isInteger, "a whole number");
  if (!("name" in target) || transforms.some((t) => t.type !== "NONE"))
    return {
      refused: `${path}: a size is read only of a header, query argument or cookie, without transformations`,
      at,
    };
  if (!((op === "GT" && size === 0) || (op === "GE" && size === 1)))
    return { refused: `${path}: a size is read only as GT 0 (the value is sent), not ${op} ${size}`, at };
  return { ...NONE, conditions: [emptyTest(target.kind, target.name, false)], notes: [] } satisfies Scope;
}
