/**
 * Times on the command line (`--from`, `--to`, gen's patterns), in the rule files' one duration grammar: integer
 * ms as in a trace (`2500`), a duration as rule files write it (`500ms`, `3s`, `min`, `10min`: an offset from 0),
 * or a UTC clock time on 1970-01-01 (`12:00:50`, `12:00:50.250`, i.e. 43 250 000 ms; window algorithms are
 * epoch-aligned, so the day does not change what a minute boundary is). Always a whole number of ms.
 */
import { DURATION_HINT, parseDuration } from "../rules/duration.ts";

const PLAIN_MS = /^\d+$/;
const CLOCK = /^(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/;

export const TIME_HINT = `a time: integer ms ("2500"), ${DURATION_HINT}, or a UTC clock time ("12:00:50", "12:00:50.250")`;

/** `text` as integer ms, or why it is not a time. */
export function parseTime(text: string): { readonly ms: number } | { readonly error: string } {
  if (PLAIN_MS.test(text)) {
    const ms = Number(text);
    return Number.isSafeInteger(ms) ? { ms } : { error: `${JSON.stringify(text)} is too large` };
  }
  const clock = CLOCK.exec(text);
  if (clock !== null) {
    const [h, m, s] = [Number(clock[1]), Number(clock[2]), Number(clock[3] ?? "0")];
    if (h > 23 || m > 59 || s > 59) return { error: `${JSON.stringify(text)} is not a clock time (HH:MM[:SS[.mmm]])` };
    const ms = Number((clock[4] ?? "").padEnd(3, "0"));
    return { ms: ((h * 60 + m) * 60 + s) * 1000 + ms };
  }
  if (/[a-z]$/.test(text)) {
    const duration = parseDuration(text);
    if (!("error" in duration)) return duration;
    if (!duration.error.startsWith("must be")) return duration;
  }
  return { error: `must be ${TIME_HINT}, got ${JSON.stringify(text)}` };
}
