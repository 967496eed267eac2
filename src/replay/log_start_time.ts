/**
 * Envoy's `%START_TIME(FORMAT)%`: the request's start written with a format of its own (Envoy's access log docs,
 * "START_TIME can be customized using a format string"): strftime's date and time fields, and Envoy's `%s` (seconds
 * since the epoch) and `%f` / `%1f`..`%9f` (fractional seconds, 9 digits by default). Envoy writes it in UTC.
 */

import { MONTHS, utcMs } from "./log_lines.ts";
import { parseIsoMs } from "./log_request.ts";

/** What each specifier matches, and the field it gives (`T` and `F` stand for several). */
const FIELDS: Readonly<Record<string, { readonly re: string; readonly field: string } | string>> = {
  Y: { re: "(\\d{4})", field: "year" },
  m: { re: "(\\d{2})", field: "month" },
  d: { re: "(\\d{2})", field: "day" },
  e: { re: " ?(\\d{1,2})", field: "day" },
  H: { re: "(\\d{2})", field: "hour" },
  M: { re: "(\\d{2})", field: "minute" },
  S: { re: "(\\d{2})", field: "second" },
  b: { re: `(${MONTHS.join("|")})`, field: "monthName" },
  z: { re: "([+-]\\d{4})", field: "offset" },
  s: { re: "(\\d{1,12})", field: "epoch" },
  T: "%H:%M:%S",
  F: "%Y-%m-%d",
};

/** A reader of `%START_TIME(spec)%` values as ms since the epoch (NaN when a value does not fit), or why not. */
export function startTimeReader(spec: string | null): ((text: string) => number) | { readonly error: string } {
  if (spec === null) return parseIsoMs;
  const fields: string[] = [];
  let source = "^";
  const expanded = spec.replace(/%([TF])/g, (_, c: string) => FIELDS[c] as string);
  for (let i = 0; i < expanded.length; i++) {
    const c = expanded[i]!;
    if (c !== "%") {
      source += c.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      continue;
    }
    const next = expanded.slice(i + 1);
    const fraction = /^([1-9]?)f/.exec(next);
    const field = FIELDS[next[0] ?? ""];
    if (next[0] === "%") source += "%";
    else if (fraction !== null) {
      source += `(\\d{${fraction[1] === "" ? 9 : fraction[1]}})`;
      fields.push("fraction");
      i += fraction[0].length - 1;
    } else if (typeof field === "object") {
      source += field.re;
      fields.push(field.field);
    } else {
      return {
        error: `%START_TIME(${spec})%: %${next[0] ?? ""} is not read (only %Y %m %d %e %b %H %M %S %T %F %z, %s and %f)`,
      };
    }
    i++;
  }
  const has = (f: string) => fields.includes(f);
  const dated = ["year", "day", "hour", "minute", "second"].every(has) && (has("month") || has("monthName"));
  if (!has("epoch") && !dated) {
    return { error: `%START_TIME(${spec})%: needs %s, or the date and the time to the second (%Y %m %d %H %M %S)` };
  }
  const re = new RegExp(`${source}$`);
  return (text) => {
    const m = re.exec(text);
    if (m === null) return Number.NaN;
    const of = (f: string) => (has(f) ? m[fields.indexOf(f) + 1] : undefined);
    const ms = Number((of("fraction") ?? "").slice(0, 3).padEnd(3, "0"));
    if (has("epoch")) return Number(of("epoch")) * 1000 + ms;
    const month = has("month") ? Number(of("month")) : MONTHS.indexOf(of("monthName")!) + 1;
    const date = [Number(of("year")), month, Number(of("day")), Number(of("hour")), Number(of("minute"))];
    return utcMs([...date, Number(of("second"))], ms, of("offset") ?? "Z");
  };
}
