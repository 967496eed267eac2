/**
 * Envoy's global rate limit filter (`envoy.filters.http.ratelimit`), from the Envoy configuration given with the
 * service's (`--envoy`, or the same file): which `domain` it asks the service about, and what it answers when the
 * service fails (`failure_mode_deny`) or refuses (`rate_limited_status`). A service domain no filter asks about is never
 * asked: its limits never apply.
 */
import { isObject, type Obj, walkObjects } from "./envoy_file.ts";
import { statusOf } from "./envoy_local.ts";
import type { ReportItem } from "./report.ts";

const FILTER_TYPE = "type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit";
const FILTER_NAMES = ["envoy.filters.http.ratelimit", "envoy.rate_limit"];

/** What the filters asking about one domain make of its limits. */
export interface FilterSettings {
  /** `closed` when the filter denies a request the service could not answer (`failure_mode_deny: true`). */
  readonly onError: "closed" | null;
  /** The status of a denial (`rate_limited_status`; 429 unless set). */
  readonly status: number | null;
}

/** Every global rate limit filter's config in the given roots (`typed_config` of an `http_filters` entry). */
export function globalFilters(roots: readonly unknown[]): Obj[] {
  const out: Obj[] = [];
  for (const root of roots) {
    walkObjects(root, (value) => {
      // `typed_config` (v3), or `config` under the v2 names older Envoy configurations use.
      const named = typeof value.name === "string" && FILTER_NAMES.includes(value.name);
      const typed = isObject(value.typed_config)
        ? value.typed_config
        : named && isObject(value.config)
          ? value.config
          : null;
      if (typed === null || (typed["@type"] !== FILTER_TYPE && !named) || !("domain" in typed)) return true;
      out.push(typed);
      return false;
    });
  }
  return out;
}

/**
 * What the filters make of `domain`'s limits: `null` when no filter was given (nothing known), `"never"` when
 * filters were given and none asks about it (reported: left out), else their settings (reported where they disagree).
 */
export function filterSettings(
  filters: readonly Obj[],
  domain: string,
  where: string,
  report: ReportItem[],
): FilterSettings | "never" | null {
  if (filters.length === 0) return null;
  const mine = filters.filter((f) => String(f.domain) === domain);
  if (mine.length === 0) {
    const asked = [...new Set(filters.map((f) => String(f.domain)))].join(", ");
    report.push({
      where,
      kind: "left out",
      message: `domain ${domain}: no envoy.filters.http.ratelimit of the Envoy configuration given asks about it (they ask about ${asked}), so none of its limits applies`,
    });
    return "never";
  }
  const deny = new Set(mine.map((f) => f.failure_mode_deny === true));
  const statuses = new Set(
    mine.map((f) => (f.rate_limited_status === undefined ? 429 : statusOf(f.rate_limited_status, where, report))),
  );
  if (deny.size > 1 || statuses.size > 1) {
    report.push({
      where,
      kind: "approximate",
      message: `domain ${domain}: its Envoy filters differ in failure_mode_deny or rate_limited_status; the rules take the first's`,
    });
  }
  const first = mine[0]!;
  const status = first.rate_limited_status === undefined ? 429 : statusOf(first.rate_limited_status, where, report);
  return { onError: first.failure_mode_deny === true ? "closed" : null, status: status === 429 ? null : status };
}
