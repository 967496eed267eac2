/**
 * Times as people write them on the command line (`2500`, `2.5s`, `12:00:50`), and as charts and tables print them.
 * Everything is integer milliseconds since the Unix epoch; clock times are UTC on 1970-01-01, so `12:00:50` is
 * 43 250 000 ms. (Window algorithms are epoch-aligned, so the day does not change what a minute boundary is.)
 */

const UNIT_MS = { ms: 1, s: 1_000, min: 60_000, h: 3_600_000, d: 86_400_000 } as const;

const PLAIN_MS = /^\d+$/;
const WITH_UNIT = /^(\d+)(?:\.(\d+))?(ms|s|min|h|d)$/;
const CLOCK = /^(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/;

export const TIME_HINT =
  'a time: integer ms ("2500"), a number and a unit ("2.5s", "500ms", "1min") or a UTC clock time ("12:00:50", "12:00:50.250")';

/** `text` as integer ms, or why it is not a time. */
export function parseTime(text: string): { readonly ms: number } | { readonly error: string } {
  if (PLAIN_MS.test(text)) return checked(Number(text), text);
  const unit = WITH_UNIT.exec(text);
  if (unit !== null) {
    const scale = UNIT_MS[unit[3] as keyof typeof UNIT_MS];
    const fraction = unit[2] ?? "";
    // Exact decimal arithmetic: "2.5s" is 25 × 1000 / 10, and must come out a whole number of ms.
    const numerator = Number(unit[1] + fraction) * scale;
    const denominator = 10 ** fraction.length;
    if (numerator % denominator !== 0) return { error: `${JSON.stringify(text)} is not a whole number of ms` };
    return checked(numerator / denominator, text);
  }
  const clock = CLOCK.exec(text);
  if (clock !== null) {
    const [h, m, s] = [Number(clock[1]), Number(clock[2]), Number(clock[3] ?? "0")];
    if (h > 23 || m > 59 || s > 59) return { error: `${JSON.stringify(text)} is not a clock time (HH:MM[:SS[.mmm]])` };
    const ms = Number((clock[4] ?? "").padEnd(3, "0"));
    return { ms: ((h * 60 + m) * 60 + s) * 1000 + ms };
  }
  return { error: `must be ${TIME_HINT}, got ${JSON.stringify(text)}` };
}

function checked(ms: number, text: string): { readonly ms: number } | { readonly error: string } {
  return Number.isSafeInteger(ms) ? { ms } : { error: `${JSON.stringify(text)} is too large` };
}

/** A duration as rule files write it: `s`, `3s`, `min`, `250ms` (the largest unit that divides it). */
export function formatDurationUnit(ms: number): string {
  for (const unit of ["d", "h", "min", "s"] as const) {
    const size = UNIT_MS[unit];
    if (ms % size === 0) return ms === size ? unit : `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** A duration for prose: `60 s`, `1 s`, `250 ms`, `10 min`, `2 h`, `1 d` (seconds below 10 minutes). */
export function formatSpan(ms: number): string {
  if (ms < 1000 || (ms < 600_000 && ms % 1000 !== 0)) return ms < 1000 ? `${ms} ms` : `${trimNumber(ms / 1000, 3)} s`;
  if (ms < 600_000) return `${ms / 1000} s`;
  for (const unit of ["d", "h", "min", "s"] as const) {
    if (ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]} ${unit}`;
  }
  return `${trimNumber(ms / 1000, 3)} s`;
}

/** How to print times: seconds from zero (`2.5 s`), or UTC time of day (`12:00:50`). */
export type TimeStyle = "seconds" | "clock";

/** Clock time for traces far from zero (real timestamps, or clock times from `sluice gen`), seconds otherwise. */
export function defaultTimeStyle(firstMs: number): TimeStyle {
  return firstMs >= 3_600_000 ? "clock" : "seconds";
}

/** `t` for a table: `2.5 s`, or `12:01:00.000`. */
export function formatTime(ms: number, style: TimeStyle): string {
  if (style === "seconds") return `${trimNumber(ms / 1000, 3)} s`;
  return `${clockOf(ms)}.${String(mod(ms, 1000)).padStart(3, "0")}`;
}

/** `t` for an axis tick: `2.5 s`, or `12:01:00` (milliseconds only when the tick has them). */
export function formatTick(ms: number, style: TimeStyle): string {
  if (style === "seconds") return `${trimNumber(ms / 1000, 3)} s`;
  const frac = mod(ms, 1000);
  return frac === 0 ? clockOf(ms) : `${clockOf(ms)}.${String(frac).padStart(3, "0")}`;
}

function clockOf(ms: number): string {
  const secondsOfDay = Math.floor(mod(ms, 86_400_000) / 1000);
  const h = Math.floor(secondsOfDay / 3600);
  const m = Math.floor(secondsOfDay / 60) % 60;
  const s = secondsOfDay % 60;
  return [h, m, s].map((n) => String(n).padStart(2, "0")).join(":");
}

function mod(n: number, d: number): number {
  return ((n % d) + d) % d;
}

/** A number with at most `digits` decimals and no trailing zeros (`2.5`, `0`, `16.667`). Never `-0`. */
export function trimNumber(n: number, digits: number): string {
  const text = n.toFixed(digits).replace(/\.?0+$/, "");
  return text === "-0" ? "0" : text;
}

/** Tick steps that read well both as seconds and on a clock face. */
const STEPS_MS = [
  1, 2, 5, 10, 20, 50, 100, 200, 250, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
  600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000,
];

/** Round tick positions in [fromMs, toMs]: the smallest step giving at most `maxTicks` of them. */
export function ticks(fromMs: number, toMs: number, maxTicks = 9): number[] {
  const span = Math.max(1, toMs - fromMs);
  let step = STEPS_MS.find((s) => span / s <= maxTicks - 1);
  if (step === undefined) step = Math.ceil(span / (maxTicks - 1) / 86_400_000) * 86_400_000;
  const out: number[] = [];
  for (let t = Math.ceil(fromMs / step) * step; t <= toMs; t += step) out.push(t);
  return out;
}

/** The tick step `ticks` would use, for padding a range out to round values. */
export function tickStep(fromMs: number, toMs: number, maxTicks = 9): number {
  const span = Math.max(1, toMs - fromMs);
  return STEPS_MS.find((s) => span / s <= maxTicks - 1) ?? Math.ceil(span / (maxTicks - 1) / 86_400_000) * 86_400_000;
}
