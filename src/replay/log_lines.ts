/**
 * NGINX's `$time_local` read and written, and a request written as an NGINX log line (for round trips and tests).
 * logs.ts re-exports both.
 */
import { nginxHeaderVar } from "./log_fields.ts";
import type { RequestLine } from "./request_trace.ts";

/** Month names as `$time_local` and strftime's `%b` write them. */
export const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** `10/Oct/2000:13:55:36 -0700` as ms since the epoch, or NaN (a day, hour or offset no clock shows included). */
export function parseTimeLocal(text: string): number {
  const m = /^(\d{2})\/([A-Z][a-z]{2})\/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-]\d{4})$/.exec(text);
  if (m === null) return Number.NaN;
  const month = MONTHS.indexOf(m[2]!) + 1;
  if (month < 1) return Number.NaN;
  return utcMs([m[3], month, m[1], m[4], m[5], m[6]].map(Number), 0, m[7]!);
}

/**
 * The instant of a date and time (`[year, month 1-12, day, hour, minute, second]`) and `ms` at UTC offset `offset`
 * (`Z`, `+hhmm` or `+hh:mm`), or NaN if any field is out of its range: `Date.UTC` would roll 31 Feb over to 3 March
 * (or hour 25 to the next day) and a log line that no clock wrote would be read as another time.
 */
export function utcMs(fields: readonly number[], ms: number, offset: string): number {
  const [year, month, day, hour, minute, second] = fields as [number, number, number, number, number, number];
  const z = /^(?:Z|([+-])([01]\d|2[0-3]):?([0-5]\d))$/.exec(offset);
  const t = Date.UTC(year, month - 1, day, hour, minute, second, ms);
  const d = new Date(t);
  const real = d.getUTCFullYear() === year && d.getUTCMonth() === month - 1 && d.getUTCDate() === day;
  if (z === null || !real || hour > 23 || minute > 59 || second > 59) return Number.NaN;
  const offsetMs = z[1] === undefined ? 0 : (z[1] === "-" ? -1 : 1) * (Number(z[2]) * 60 + Number(z[3])) * 60_000;
  return t - offsetMs;
}

/**
 * A request as an NGINX log line in `format` (for round trips and tests): the variables a request trace knows are
 * written (`$msec`, `$time_local` in UTC, `$request`, `$remote_addr`, header variables), every other one as `-`.
 */
export function formatNginxLine(
  format: string,
  r: RequestLine,
  fields: { readonly keyHeader: string; readonly userHeader: string } = {
    keyHeader: "x-api-key",
    userHeader: "x-user-id",
  },
): string {
  return format.replace(/\$\{?([A-Za-z0-9_]+)\}?/g, (_, name: string) => {
    switch (name) {
      case "msec":
        return `${Math.floor(r.tMs / 1000)}.${String(r.tMs % 1000).padStart(3, "0")}`;
      case "time_local":
        return timeLocal(r.tMs);
      case "request":
        return `${r.method} ${r.path} HTTP/1.1`;
      case "request_method":
        return r.method;
      case "request_uri":
        return r.path;
      case "remote_addr":
        return r.address ?? "-";
      case "request_time":
        return "0.000";
      case "status":
        return "200";
      default:
        if (name === nginxHeaderVar(fields.keyHeader)) return r.key ?? "-";
        if (name === nginxHeaderVar(fields.userHeader)) return r.user ?? "-";
        return "-";
    }
  });
}

function timeLocal(tMs: number): string {
  const d = new Date(tMs);
  const two = (n: number) => String(n).padStart(2, "0");
  return `${two(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())} +0000`;
}
