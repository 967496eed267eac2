/** Envoy's local rate limit filter as Sluice rules: each descriptor's `token_bucket` becomes a `scope: local` rule. */
import { EnvoyImportError, isObject, type Loaded, type Obj } from "./envoy_file.ts";
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
): DraftRule[] {
  const where = `${file}:${loaded.lineOf(filter)}`;
  const prefix = typeof filter.stat_prefix === "string" ? filter.stat_prefix : "local";
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
  const status = statusOf(filter.status, where);
  const rules: DraftRule[] = [filterWide(filter, prefix, where, shadow, status, report, taken)];
  const descriptors = Array.isArray(filter.descriptors) ? filter.descriptors : [];
  for (const d of descriptors) {
    const rule = localRule(d, prefix, file, loaded, mapping, report, taken, shadow, status);
    if (rule !== null) rules.push(rule);
  }
  return rules;
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
): DraftRule {
  const bucket = tokenBucket(filter.token_bucket as Obj, where);
  const notes: string[] = [];
  const say = (message: string) => {
    report.push({ where, kind: "approximate", message: `${prefix}: ${message}` });
    notes.push(`approximate: ${message}`);
  };
  say(
    "the filter-wide bucket is one per Envoy instance; as key: global with scope: local it is one per Worker isolate, and there are as many of those as Cloudflare runs",
  );
  if (Array.isArray(filter.descriptors) && filter.descriptors.length > 0) {
    say(
      "Envoy takes from the filter-wide bucket only requests no descriptor matched; Sluice's rule counts every request",
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

/** Envoy's HttpStatus names the filter's `status` may take, as numbers. */
const STATUS_NAMES: Readonly<Record<string, number>> = {
  BadRequest: 400,
  Unauthorized: 401,
  PaymentRequired: 402,
  Forbidden: 403,
  NotFound: 404,
  RequestTimeout: 408,
  TooManyRequests: 429,
  InternalServerError: 500,
  BadGateway: 502,
  ServiceUnavailable: 503,
  GatewayTimeout: 504,
};

/** The filter's `status` (`{ code: TooManyRequests }` or a number): 429, Envoy's default, when not set. */
function statusOf(v: unknown, where: string): number {
  if (v === undefined || v === null) return 429;
  const code = isObject(v) ? v.code : undefined;
  const n =
    typeof code === "number" ? code : typeof code === "string" ? (STATUS_NAMES[code] ?? Number(code)) : Number.NaN;
  if (!Number.isInteger(n) || n < 400 || n > 599) {
    throw new EnvoyImportError(
      `${where}: status must be { code: NAME } with a 4xx or 5xx status (Sluice answers a denial with one), got ${JSON.stringify(v)}`,
    );
  }
  return n;
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
  const m = typeof b.fill_interval === "string" ? /^(\d+)(?:\.(\d{1,3}))?s$/.exec(b.fill_interval) : null;
  if (m === null)
    throw new EnvoyImportError(`${where}: token_bucket.fill_interval must be a duration such as "1s" or "0.5s"`);
  const ms = Number(m[1]) * 1000 + Number((m[2] ?? "").padEnd(3, "0"));
  if (ms < 1) throw new EnvoyImportError(`${where}: token_bucket.fill_interval must be at least 1ms`);
  return { maxTokens, perFill, interval: ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms` };
}

/** A runtime fractional percent's default value, in percent; 0 when not set (Envoy's default). */
function percentOf(v: unknown): number {
  if (!isObject(v) || !isObject(v.default_value)) return 0;
  const n = Number(v.default_value.numerator ?? 0);
  const denominator = v.default_value.denominator ?? "HUNDRED";
  const per = denominator === "TEN_THOUSAND" ? 100 : denominator === "MILLION" ? 10_000 : 1;
  return n / per;
}
