/** Envoy's local rate limit filter as Sluice rules: each descriptor's `token_bucket` becomes a `scope: local` rule. */
import { EnvoyImportError, isObject, type Loaded, type Obj } from "./envoy_file.ts";
import { type LocalScope, placed } from "./envoy_local_scope.ts";
import { type EnvoyMapping, matchOf, type Step } from "./envoy_mapping.ts";
import { type DraftRule, type ReportItem, ruleId } from "./report.ts";

/** Every local rate limit filter configuration in a file (the filter's own config, or nested in a bootstrap). */
export function localFilters(value: unknown, depth = 0): Obj[] {
  if (depth > 50) return [];
  if (Array.isArray(value)) return value.flatMap((v) => localFilters(v, depth + 1));
  if (!isObject(value)) return [];
  if (isObject(value.token_bucket) && ("stat_prefix" in value || "descriptors" in value || "filter_enforced" in value))
    return [value];
  return Object.values(value).flatMap((v) => localFilters(v, depth + 1));
}

export function importLocal(
  filter: Obj,
  file: string,
  loaded: Loaded,
  mapping: EnvoyMapping,
  report: ReportItem[],
  taken: Set<string>,
  scope: LocalScope,
): DraftRule[] {
  const where = `${file}:${loaded.lineOf(filter)}`;
  checkLocal(filter, file, loaded);
  const prefix = String(filter.stat_prefix);
  if (scope.refused !== null || scope.routes?.length === 0) {
    const message = `${prefix}: ${scope.refused ?? scope.notes.join("; ")}`;
    report.push({ where, kind: scope.refused === null ? "note" : "left out", message });
    return [];
  }
  return placed(
    importBuckets(filter, prefix, where, file, loaded, mapping, report, taken),
    scope,
    prefix,
    where,
    report,
  );
}

// long: the filter's fields in Envoy's order, each refusal or difference reported where it is read
function importBuckets(
  filter: Obj,
  prefix: string,
  where: string,
  file: string,
  loaded: Loaded,
  mapping: EnvoyMapping,
  report: ReportItem[],
  taken: Set<string>,
): DraftRule[] {
  const enabled = percentOf(filter.filter_enabled);
  const enforced = percentOf(filter.filter_enforced);
  if (enabled === 0) {
    report.push({
      where,
      kind: "left out",
      message: `${prefix}: filter_enabled is 0% (Envoy's default when not set), so the filter limits nothing`,
    });
    return [];
  }
  const shadow = enforced < 100;
  if (enabled < 100 || (enforced > 0 && enforced < 100)) {
    report.push({
      where,
      kind: "approximate",
      message: `${prefix}: enabled for ${enabled}% and enforced for ${enforced}% of requests; Sluice applies a rule to all of them (${shadow ? "shadow" : "enforce"})`,
    });
  }
  if (filter.local_rate_limit_per_downstream_connection === true) {
    report.push({
      where,
      kind: "left out",
      message: `${prefix}: local_rate_limit_per_downstream_connection keeps a bucket per client connection; Sluice sees requests, not connections`,
    });
    return [];
  }
  const status = statusOf(filter.status, where, report);
  for (const [field, what] of Object.entries(UNMAPPED)) {
    const value = filter[field];
    if (value === undefined || value === false || value === "DISABLE_X_RATELIMIT_HEADERS") continue;
    const kind = field === "local_cluster_rate_limit" ? "approximate" : "note";
    report.push({ where, kind, message: `${prefix}: ${field}: ${what}` });
  }
  const descriptors = Array.isArray(filter.descriptors) ? filter.descriptors : [];
  const wide = filterWide(filter, prefix, where, shadow, status, report, taken);
  const rules: DraftRule[] = wide === null ? [] : [wide];
  for (const d of descriptors) {
    const rule = localRule(d, prefix, file, loaded, mapping, report, taken, shadow, status, filter);
    if (rule !== null) rules.push(rule);
  }
  if (rules.length > 1) {
    report.push({
      where,
      kind: "approximate",
      message: `${prefix}: Envoy takes a request's tokens bucket by bucket (the slowest-filling descriptor first, the filter-wide bucket last) and keeps what it took when a later bucket refuses; Sluice gives back what the other rules took from a request one of them refuses`,
    });
  }
  return rules;
}

/** Fields of the filter that change what a client sees or which requests it counts, and what Sluice does instead. */
const UNMAPPED: Readonly<Record<string, string>> = {
  response_headers_to_add:
    "Envoy adds these headers to the responses it limits; Sluice's 429 carries Retry-After and the RateLimit headers, not these",
  request_headers_to_add_when_not_enforced:
    "Envoy adds these headers to requests a not-enforced limit would refuse; a shadow rule logs them instead",
  enable_x_ratelimit_headers:
    "Envoy's x-ratelimit-* headers (draft 03); Sluice sends the IETF RateLimit and RateLimit-Policy headers",
  rate_limited_as_resource_exhausted:
    "a gRPC status for limited gRPC requests; Sluice answers every limited request with HTTP",
  local_cluster_rate_limit:
    "Envoy divides each bucket among the local cluster's hosts; the rules keep the whole bucket in each isolate (scope: local)",
  stage: "the descriptors come from the route actions of this stage; --map or --envoy says which requests send them",
};

/**
 * What Envoy refuses in a local rate limit filter's configuration (its proto's validation and
 * local_ratelimit_impl.cc): no `stat_prefix`, a filter-wide `fill_interval` below 50 ms (0 or none: no filter-wide
 * bucket), a descriptor's below 50 ms or missing, a descriptor without entries, two descriptors with the same entries.
 */
function checkLocal(filter: Obj, file: string, loaded: Loaded): void {
  const refuse = (node: object, why: string): never => {
    throw new EnvoyImportError(
      `${file}:${loaded.lineOf(node)}: ${why}; Envoy refuses this configuration, so it is not imported`,
    );
  };
  if (typeof filter.stat_prefix !== "string" || filter.stat_prefix === "")
    refuse(filter, "stat_prefix: value length must be at least 1 (the filter's statistics are named by it)");
  const wide = isObject(filter.token_bucket) ? intervalMs(filter.token_bucket, `${file}:${loaded.lineOf(filter)}`) : 0;
  if (wide > 0 && wide < 50) refuse(filter, "local rate limit token bucket fill timer must be >= 50ms");
  const seen = new Set<string>();
  for (const d of Array.isArray(filter.descriptors) ? filter.descriptors : []) {
    if (!isObject(d) || !Array.isArray(d.entries) || d.entries.length === 0 || !isObject(d.token_bucket))
      refuse(isObject(d) ? d : filter, "a local descriptor needs entries (at least one) and a token_bucket");
    if (intervalMs(d.token_bucket, `${file}:${loaded.lineOf(d)}`) < 50)
      refuse(d, "local rate limit descriptor token bucket fill timer must be >= 50ms");
    const entries = (d.entries as unknown[]).map((e) =>
      isObject(e) ? `${String(e.key)}=${e.value === undefined || e.value === null ? "" : String(e.value)}` : "?",
    );
    const text = entries.join(", ");
    if (seen.has(text)) refuse(d, `duplicate descriptor in the local rate descriptor: ${text}`);
    seen.add(text);
  }
}

function localRule(
  d: unknown,
  prefix: string,
  file: string,
  loaded: Loaded,
  mapping: EnvoyMapping,
  report: ReportItem[],
  taken: Set<string>,
  shadow: boolean,
  status: number,
  filter: Obj,
): DraftRule | null {
  const line = isObject(d) ? loaded.lineOf(d) : 0;
  const where = `${file}:${line}`;
  if (!isObject(d) || !Array.isArray(d.entries) || !isObject(d.token_bucket)) {
    throw new EnvoyImportError(`${where}: a local descriptor needs entries and a token_bucket`);
  }
  const steps: Step[] = d.entries.map((e) => {
    if (!isObject(e) || typeof e.key !== "string")
      throw new EnvoyImportError(`${where}: a descriptor entry needs a key`);
    return { key: e.key, value: e.value === undefined || e.value === "" ? null : String(e.value), line };
  });
  const chainText = steps.map((s) => (s.value === null ? s.key : `${s.key}=${s.value}`)).join(", ");
  const match = matchOf(steps, chainText, where, mapping, report);
  if (match === null) return null;
  const bucket = tokenBucket(d.token_bucket, where);
  if (steps.some((s) => s.value === null)) {
    const lru = typeof filter.max_dynamic_descriptors === "number" ? filter.max_dynamic_descriptors : 20;
    report.push({
      where,
      kind: "approximate",
      message: `${chainText}: an entry without a value gives each value its own bucket, and Envoy keeps at most ${lru} of them (max_dynamic_descriptors${typeof filter.max_dynamic_descriptors === "number" ? "" : ", 20 unless set"}), the least recently used dropped and started full again; Sluice keeps every value's`,
    });
  }
  const message = `Envoy adds ${bucket.perFill} token(s) at once every ${bucket.interval}; Sluice's bucket refills continuously at the same rate`;
  if (bucket.perFill > 1) report.push({ where, kind: "approximate", message: `${chainText}: ${message}` });
  const fields: [string, string | number | boolean][] = [
    ["algorithm", "token_bucket"],
    ["rate", `${bucket.perFill}/${bucket.interval}`],
    ["burst", bucket.maxTokens],
    ["scope", "local"],
    ["status", status],
    ...match.fields,
  ];
  if (shadow) fields.push(["mode", "shadow"]);
  return {
    id: ruleId(`${prefix}-${steps.map((s) => s.value ?? s.key).join("-")}`, taken),
    source: `${where}: local rate limit ${prefix}, descriptor ${chainText}`,
    notes: [...match.notes, ...(bucket.perFill > 1 ? [`approximate: ${message}`] : [])],
    match: match.match,
    ...(match.key === null ? {} : { key: match.key }),
    fields,
  };
}

/**
 * The filter-wide `token_bucket`: one budget for every request through one Envoy (`key: global`, `scope: local`:
 * one per isolate, as Envoy keeps one per instance).
 */
function filterWide(
  filter: Obj,
  prefix: string,
  where: string,
  shadow: boolean,
  status: number,
  report: ReportItem[],
  taken: Set<string>,
): DraftRule | null {
  // Envoy ignores a filter-wide bucket whose fill_interval is 0 or not set (local_ratelimit_impl.cc).
  if (!isObject(filter.token_bucket) || intervalMs(filter.token_bucket, where) === 0) return null;
  const bucket = tokenBucket(filter.token_bucket, where);
  const notes: string[] = [];
  const say = (message: string) => {
    report.push({ where, kind: "approximate", message: `${prefix}: ${message}` });
    notes.push(`approximate: ${message}`);
  };
  say(
    "the filter-wide bucket is one per Envoy instance; as key: global with scope: local it is one per Worker isolate, and there are as many of those as Cloudflare runs",
  );
  // always_consume_default_token_bucket is true unless set: every request takes a filter-wide token, as in Sluice.
  if (
    Array.isArray(filter.descriptors) &&
    filter.descriptors.length > 0 &&
    filter.always_consume_default_token_bucket === false
  ) {
    say(
      "always_consume_default_token_bucket: false: Envoy takes from the filter-wide bucket only requests no descriptor matched; Sluice's rule counts every request",
    );
  }
  if (bucket.perFill > 1)
    say(
      `Envoy adds ${bucket.perFill} token(s) at once every ${bucket.interval}; Sluice's bucket refills continuously at the same rate`,
    );
  const fields: [string, string | number | boolean][] = [
    ["algorithm", "token_bucket"],
    ["rate", `${bucket.perFill}/${bucket.interval}`],
    ["burst", bucket.maxTokens],
    ["scope", "local"],
    ["status", status],
  ];
  if (shadow) fields.push(["mode", "shadow"]);
  return {
    id: ruleId(prefix, taken),
    source: `${where}: local rate limit ${prefix}, the filter-wide token_bucket`,
    notes,
    match: {},
    key: "global",
    fields,
  };
}

/** Envoy's HttpStatus names (envoy.type.v3.StatusCode), as numbers. */
const STATUS_NAMES: Readonly<Record<string, number>> = {
  Continue: 100,
  OK: 200,
  Created: 201,
  Accepted: 202,
  NonAuthoritativeInformation: 203,
  NoContent: 204,
  ResetContent: 205,
  PartialContent: 206,
  MultiStatus: 207,
  AlreadyReported: 208,
  IMUsed: 226,
  MultipleChoices: 300,
  MovedPermanently: 301,
  Found: 302,
  SeeOther: 303,
  NotModified: 304,
  UseProxy: 305,
  TemporaryRedirect: 307,
  PermanentRedirect: 308,
  BadRequest: 400,
  Unauthorized: 401,
  PaymentRequired: 402,
  Forbidden: 403,
  NotFound: 404,
  MethodNotAllowed: 405,
  NotAcceptable: 406,
  ProxyAuthenticationRequired: 407,
  RequestTimeout: 408,
  Conflict: 409,
  Gone: 410,
  LengthRequired: 411,
  PreconditionFailed: 412,
  PayloadTooLarge: 413,
  URITooLong: 414,
  UnsupportedMediaType: 415,
  RangeNotSatisfiable: 416,
  ExpectationFailed: 417,
  MisdirectedRequest: 421,
  UnprocessableEntity: 422,
  Locked: 423,
  FailedDependency: 424,
  UpgradeRequired: 426,
  PreconditionRequired: 428,
  TooManyRequests: 429,
  RequestHeaderFieldsTooLarge: 431,
  InternalServerError: 500,
  NotImplemented: 501,
  BadGateway: 502,
  ServiceUnavailable: 503,
  GatewayTimeout: 504,
  HTTPVersionNotSupported: 505,
  VariantAlsoNegotiates: 506,
  InsufficientStorage: 507,
  LoopDetected: 508,
  NotExtended: 510,
  NetworkAuthenticationRequired: 511,
};

/**
 * The filter's `status` (`{ code: TooManyRequests }`, or the code's number): 429, Envoy's default, when not set; a
 * status below 400 is 429 too, as Envoy answers (local_ratelimit.cc `toErrorCode`). A name the enum has not, or
 * `Empty` (0), Envoy refuses.
 */
export function statusOf(v: unknown, where: string, report: ReportItem[]): number {
  if (v === undefined || v === null) return 429;
  const code = isObject(v) ? v.code : undefined;
  const n =
    typeof code === "number" ? code : typeof code === "string" ? (STATUS_NAMES[code] ?? Number.NaN) : Number.NaN;
  if (!Object.values(STATUS_NAMES).includes(n)) {
    throw new EnvoyImportError(
      `${where}: status: code must be one of Envoy's status names (TooManyRequests, ServiceUnavailable, ...) or their numbers, got ${JSON.stringify(v)}; Envoy refuses this configuration, so it is not imported`,
    );
  }
  if (n >= 400) return n;
  report.push({
    where,
    kind: "note",
    message: `status ${JSON.stringify(code)} is below 400, which Envoy answers with 429: status 429`,
  });
  return 429;
}

function tokenBucket(b: Obj, where: string): { maxTokens: number; perFill: number; interval: string } {
  const maxTokens = b.max_tokens;
  const perFill = b.tokens_per_fill ?? 1;
  if (typeof maxTokens !== "number" || !Number.isSafeInteger(maxTokens) || maxTokens < 1) {
    throw new EnvoyImportError(`${where}: token_bucket.max_tokens must be a positive whole number`);
  }
  if (typeof perFill !== "number" || !Number.isSafeInteger(perFill) || perFill < 1) {
    throw new EnvoyImportError(`${where}: token_bucket.tokens_per_fill must be a positive whole number`);
  }
  const ms = intervalMs(b, where);
  return { maxTokens, perFill, interval: ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms` };
}

/**
 * A token bucket's `fill_interval` in whole ms, as Envoy reads it (PROTOBUF_GET_MS_OR_DEFAULT: a protobuf duration,
 * `"1s"`, `"0.25s"` or `{ seconds, nanos }`, truncated to ms; 0 when not set).
 */
function intervalMs(b: Obj, where: string): number {
  const v = b.fill_interval;
  if (v === undefined || v === null) return 0;
  if (isObject(v)) {
    const seconds = Number(v.seconds ?? 0);
    const nanos = Number(v.nanos ?? 0);
    if (Number.isSafeInteger(seconds) && seconds >= 0 && Number.isInteger(nanos) && nanos >= 0 && nanos < 1e9)
      return seconds * 1000 + Math.floor(nanos / 1e6);
  }
  const m = typeof v === "string" ? /^(\d+)(?:\.(\d{1,9}))?s$/.exec(v) : null;
  if (m === null)
    throw new EnvoyImportError(`${where}: token_bucket.fill_interval must be a duration such as "1s" or "0.5s"`);
  return Number(m[1]) * 1000 + Number((m[2] ?? "").padEnd(9, "0").slice(0, 3));
}

/** A runtime fractional percent's default value, in percent; 0 when not set (Envoy's default). */
function percentOf(v: unknown): number {
  if (!isObject(v) || !isObject(v.default_value)) return 0;
  const n = Number(v.default_value.numerator ?? 0);
  const denominator = v.default_value.denominator ?? "HUNDRED";
  const per = denominator === "TEN_THOUSAND" ? 100 : denominator === "MILLION" ? 10_000 : 1;
  return n / per;
}
