/**
 * An algorithm's parameters from a rule file: the algorithm reads them itself (its `params.read`, in its own file)
 * through a `ParamReader` that knows rule-file syntax, so this module never names an algorithm or a parameter of one
 * beyond the shared spellings of a rate (`rate`, `rate_per_s`) and a window (`window`, `window_s`).
 */
import { ALGORITHMS, type AlgorithmName, type AlgorithmParams, algorithmFor } from "../algorithms/index.ts";
import type { ParamReader } from "../algorithms/types.ts";
import { DURATION_HINT, MAX_PERIOD_MS, parseDuration, parseRate, rateOf } from "./duration.ts";
import { describe, type Raw } from "./raw.ts";
import { nonNegativeInt, optional, positiveInt, type RuleErrors } from "./read.ts";
import type { Rate, Window } from "./types.ts";

/** The parameter fields an algorithm takes (its file says which); any other parameter field on it is an error. */
export const paramSpec = (algorithm: AlgorithmName) => algorithmFor({ algorithm }).params;
/** Every parameter field of any algorithm. */
export const ALL_PARAM_KEYS = [...new Set(ALGORITHMS.flatMap((a) => paramSpec(a).keys))];

/** The algorithms whose window may be a calendar month (their `params.read` asks for `window(true)`), for messages. */
const MONTH_ALGORITHMS = ALGORITHMS.filter((algorithm) => {
  let month = false;
  const probe: ParamReader = {
    rate: () => undefined,
    window: (allowed) => {
      month ||= allowed;
      return undefined;
    },
    int: () => undefined,
    bool: (_key, fallback) => fallback,
    duration: (_key, fallbackMs) => fallbackMs,
    has: () => false,
    error: () => {},
  };
  paramSpec(algorithm).read(probe);
  return month;
}).join(", ");

export function notAParameterOf(algorithm: AlgorithmName): string {
  return `not a parameter of ${algorithm} (${algorithm} takes ${paramSpec(algorithm).takes})`;
}

/** The algorithm's parameters, read by its own `params.read` through a reader that knows rule-file syntax. */
export function resolveParams(algorithm: AlgorithmName, raw: Map<string, Raw>, e: RuleErrors): AlgorithmParams | null {
  const reader: ParamReader = {
    rate: () => resolveRate(algorithm, raw, e),
    window: (month) => resolveWindow(algorithm, raw, e, month),
    int(key, options = {}) {
      const { min = 1, fallback, zeroHint } = options;
      const parse = (v: Raw | undefined) => {
        if (min === 1 && v === 0n && zeroHint !== undefined) {
          e.add(key, `must be a positive integer, got 0 (${zeroHint})`);
          return undefined;
        }
        return min === 1 ? positiveInt(e, key, v) : nonNegativeInt(e, key, v);
      };
      return fallback === undefined ? required(raw, e, algorithm, key, parse) : optional(raw, key, fallback, parse);
    },
    bool: (key, fallback) =>
      optional(raw, key, fallback, (v) => {
        if (typeof v === "boolean") return v;
        e.add(key, `must be true or false, got ${describe(v)}`);
        return undefined;
      }),
    duration: (key, fallbackMs) =>
      optional(raw, key, fallbackMs, (v) => {
        if (typeof v !== "string") {
          e.add(key, `must be ${DURATION_HINT}, got ${describe(v)}`);
          return undefined;
        }
        const d = parseDuration(v);
        if ("error" in d) {
          e.add(key, d.error);
          return undefined;
        }
        return d.ms;
      }),
    has: (key) => raw.has(key),
    error: (key, message) => e.add(key, message),
  };
  return paramSpec(algorithm).read(reader) as AlgorithmParams | null;
}

function required<T>(
  raw: Map<string, Raw>,
  e: RuleErrors,
  algorithm: AlgorithmName,
  key: string,
  parse: (v: Raw | undefined) => T | undefined,
): T | undefined {
  if (raw.has(key)) return parse(raw.get(key));
  // `brust: 20` already says "did you mean burst?": one typo, one message.
  if (!e.suggested.has(key)) e.add(key, `required for ${algorithm}`);
  return undefined;
}

function resolveRate(algorithm: AlgorithmName, raw: Map<string, Raw>, e: RuleErrors): Rate | undefined {
  const hasPerS = raw.has("rate_per_s");
  const hasText = raw.has("rate");
  if (hasPerS && hasText) {
    e.add("rate", "give rate_per_s or rate, not both");
    return undefined;
  }
  if (hasPerS) {
    const n = positiveInt(e, "rate_per_s", raw.get("rate_per_s"));
    return n === undefined ? undefined : rateOf(n, 1000);
  }
  if (hasText) {
    const v = raw.get("rate");
    if (typeof v !== "string") {
      const hint = typeof v === "bigint" ? " (for a count per second, use rate_per_s)" : "";
      e.add("rate", `must be a rate "<amount>/<duration>" such as 10/s, 100/min or 7/3s, got ${describe(v)}${hint}`);
      return undefined;
    }
    const rate = parseRate(v);
    if ("error" in rate) {
      e.add("rate", rate.error);
      return undefined;
    }
    return rate;
  }
  if (!e.suggested.has("rate") && !e.suggested.has("rate_per_s")) {
    e.add("rate", `required for ${algorithm}: "<amount>/<duration>" such as 250/s (or rate_per_s: <count per second>)`);
  }
  return undefined;
}

function resolveWindow(
  algorithm: AlgorithmName,
  raw: Map<string, Raw>,
  e: RuleErrors,
  month: boolean,
): Window | undefined {
  const hasSeconds = raw.has("window_s");
  const hasText = raw.has("window");
  if (hasSeconds && hasText) {
    e.add("window", "give window_s or window, not both");
    return undefined;
  }
  if (hasSeconds) {
    const s = positiveInt(e, "window_s", raw.get("window_s"));
    if (s === undefined) return undefined;
    if (s * 1000 > MAX_PERIOD_MS) {
      e.add("window_s", `is too long (max 2^40 ms, about 34 years), got ${s}`);
      return undefined;
    }
    return { kind: "ms", ms: s * 1000 };
  }
  if (hasText) {
    const v = raw.get("window");
    if (v === "month") {
      if (month) return { kind: "month" };
      e.add("window", `month is only for ${MONTH_ALGORITHMS}; ${algorithm} needs a fixed length such as 30d`);
      return undefined;
    }
    if (typeof v !== "string") {
      const hint = typeof v === "bigint" ? " (for a number of seconds, use window_s)" : "";
      e.add("window", `must be ${DURATION_HINT}${month ? ", or month" : ""}, got ${describe(v)}${hint}`);
      return undefined;
    }
    const d = parseDuration(v);
    if ("error" in d) {
      e.add("window", d.error);
      return undefined;
    }
    return { kind: "ms", ms: d.ms };
  }
  if (!e.suggested.has("window") && !e.suggested.has("window_s")) {
    e.add("window_s", `required for ${algorithm} (or window: "<duration>")`);
  }
  return undefined;
}
