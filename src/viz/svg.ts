// long-file: one SVG document drawn top to bottom (lanes, marks, state line, axes, legend); the parts share its geometry.
/**
 * The comparison as a plain SVG figure, as in docs/examples/ (docs/rules.md shows one): one lane per
 * rule, each request marked allowed, delayed or denied (by color and by shape, so it reads in grey scale and for
 * color-blind readers), the charted key's state as a line underneath, window boundaries, a time axis and a legend.
 *
 * Pure and deterministic: the same comparison and options give the same bytes (no dates, no randomness, numbers
 * rounded to 0.1 px), so generated figures can be committed and checked for drift.
 */

import { capacityLabel, capacityOf, chartWindowOf, levelAt, levelName } from "../algorithms/index.ts";
import { windowIndex, windowStartMs } from "../algorithms/windows.ts";
import { type Comparison, describeRule, type Lane, type RequestOutcome } from "../replay/run.ts";
import { formatSpan, formatTick, type TimeStyle, tickStep, ticks, trimNumber } from "../replay/time.ts";
import type { ResolvedRule } from "../rules/types.ts";

export interface SvgOptions {
  readonly title: string;
  /** A line under the title; default: the trace's size and which key the state lines follow. */
  readonly subtitle?: string;
  readonly style: TimeStyle;
  /** The time range drawn, ms. Requests outside it are not drawn (they still count in the lane summaries). */
  readonly fromMs: number;
  readonly toMs: number;
}

/** Okabe–Ito colors: distinguishable with every common color-vision deficiency. */
const COLOR: Readonly<Record<RequestOutcome, string>> = {
  allowed: "#0072B2",
  delayed: "#E69F00",
  denied: "#D55E00",
  error: "#555555",
};
const FONT = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";

const WIDTH = 1000;
const PLOT_X0 = 250;
const PLOT_X1 = WIDTH - 24;
/** Space inside the plot's ends, so marks at the first and last instant are drawn whole. */
const INSET = 10;
const LANES_TOP = 104;
const LANE_HEIGHT = 122;
const LANE_GAP = 10;
/** Mark rows, from a lane's top. */
const ROW_Y: Readonly<Record<RequestOutcome, number>> = { allowed: 16, delayed: 31, denied: 46, error: 46 };
const STATE_TOP = 60;
const STATE_BOTTOM = 110;
/** Above this many boundaries in the range, window boundary lines are left out (they would be a grey wash). */
const MAX_BOUNDARY_LINES = 60;
const MAX_BOUNDARY_LABELS = 6;
/** One sample of the state line every this many px (plus one before and after every request). */
const SAMPLE_PX = 2;
/** Room a "×N" count label needs to the right of its mark. */
const LABEL_ROOM_PX = 34;

/** A range that shows the whole trace with a margin, snapped out to round tick values. */
export function defaultRange(c: Comparison): { fromMs: number; toMs: number } {
  const first = c.firstMs ?? 0;
  const last = c.lastMs ?? first;
  const pad = Math.max(last - first, 1000) * 0.08;
  const step = tickStep(first - pad, last + pad);
  let fromMs = Math.floor((first - pad) / step) * step;
  const toMs = Math.ceil((last + pad) / step) * step;
  if (first >= 0 && fromMs < 0) fromMs = 0;
  return { fromMs, toMs };
}

/** Where things go: the time range, its x scale, and where the axis sits. */
interface Frame {
  readonly fromMs: number;
  readonly toMs: number;
  readonly style: TimeStyle;
  readonly xOf: (t: number) => number;
  readonly axisY: number;
}

/** The figure, as SVG text. */
export function renderSvg(c: Comparison, options: SvgOptions): string {
  const { fromMs, toMs, style } = options;
  const span = Math.max(1, toMs - fromMs);
  const xOf = (t: number) => PLOT_X0 + INSET + ((t - fromMs) / span) * (PLOT_X1 - PLOT_X0 - 2 * INSET);
  const lanesBottom = LANES_TOP + c.lanes.length * (LANE_HEIGHT + LANE_GAP) - LANE_GAP;
  const frame: Frame = { fromMs, toMs, style, xOf, axisY: lanesBottom + 8 };
  const tickTimes = ticks(fromMs, toMs);
  const out = [...heading(c, options, frame.axisY + 52), ...legend(c)];
  // Lane backgrounds first, then the time grid over them, then everything else.
  c.lanes.forEach((_, i) => {
    const y = laneTop(i);
    out.push(`<rect x="8" y="${y}" width="${WIDTH - 16}" height="${LANE_HEIGHT}" rx="4" fill="#f5f5f5"/>`);
  });
  for (const t of tickTimes) {
    out.push(line(xOf(t), LANES_TOP, xOf(t), frame.axisY, "#dddddd", 1));
  }
  out.push(...windowBoundaries(c, frame));
  c.lanes.forEach((lane, i) => {
    out.push(...drawLane(lane, laneTop(i), c, frame));
  });
  out.push(...timeAxis(frame, tickTimes), "</g>", "</svg>");
  return `${out.join("\n")}\n`;
}

/** The opening `<svg>` of the given height, its title and description, and the title and subtitle drawn. */
function heading(c: Comparison, options: SvgOptions, height: number): string[] {
  const stateKeyText = c.stateKey === null ? "" : c.keys > 1 ? `; state lines follow key ${c.stateKey}` : "";
  const subtitle =
    options.subtitle ??
    `${c.requests} request${c.requests === 1 ? "" : "s"}, ${c.keys} key${c.keys === 1 ? "" : "s"}${stateKeyText}`;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${height}" width="${WIDTH}" height="${height}" role="img" aria-labelledby="title desc">`,
    `<title id="title">${esc(options.title)}</title>`,
    `<desc id="desc">${esc(describeFigure(c, subtitle))}</desc>`,
    markDefs(),
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<g font-family="${FONT}" fill="#222222">`,
    `<text x="16" y="28" font-size="17" font-weight="bold">${esc(options.title)}</text>`,
    `<text x="16" y="48" font-size="12" fill="#444444">${esc(subtitle)}</text>`,
  ];
}

/** Window boundaries: a dashed line per window lane, and the times labelled once above the lanes. */
function windowBoundaries(c: Comparison, { fromMs, toMs, style, xOf }: Frame): string[] {
  const out: string[] = [];
  const labelled = new Set<number>();
  c.lanes.forEach((lane, i) => {
    const bounds = boundaries(lane.rule, fromMs, toMs);
    if (bounds.length === 0 || bounds.length > MAX_BOUNDARY_LINES) return;
    const y = laneTop(i);
    for (const b of bounds) {
      out.push(
        `<line x1="${n(xOf(b))}" y1="${y + 3}" x2="${n(xOf(b))}" y2="${y + LANE_HEIGHT - 3}" stroke="#444444" stroke-width="1.2" stroke-dasharray="5 3"/>`,
      );
      labelled.add(b);
    }
  });
  const labels = [...labelled].sort((a, b) => a - b);
  if (labels.length > 0 && labels.length <= MAX_BOUNDARY_LABELS) {
    for (const b of labels) {
      const text = labels.length === 1 ? `${formatTick(b, style)} window boundary` : formatTick(b, style);
      out.push(`<text x="${n(xOf(b))}" y="${LANES_TOP - 6}" font-size="11" text-anchor="middle">${esc(text)}</text>`);
    }
  }
  return out;
}

/** The time axis: its line, a tick and label per tick time, and its title. */
function timeAxis({ style, xOf, axisY }: Frame, tickTimes: readonly number[]): string[] {
  const out = [line(PLOT_X0, axisY, PLOT_X1, axisY, "#222222", 1)];
  for (const t of tickTimes) {
    out.push(line(xOf(t), axisY, xOf(t), axisY + 5, "#222222", 1));
    out.push(
      `<text x="${n(xOf(t))}" y="${axisY + 19}" font-size="11" text-anchor="middle">${esc(formatTick(t, style))}</text>`,
    );
  }
  const axisTitle = style === "clock" ? "time of day (UTC)" : "time (s)";
  out.push(
    `<text x="${n((PLOT_X0 + PLOT_X1) / 2)}" y="${axisY + 40}" font-size="12" text-anchor="middle" fill="#444444">${axisTitle}</text>`,
  );
  return out;
}

function laneTop(i: number): number {
  return LANES_TOP + i * (LANE_HEIGHT + LANE_GAP);
}

function legend(c: Comparison): string[] {
  const items: { mark: string; text: string }[] = [];
  const y = 74;
  items.push({ mark: "allowed", text: "allowed" });
  if (c.lanes.some((l) => l.stats.delayed > 0)) {
    items.push({ mark: "delayed", text: "delayed (queued; line to its release)" });
  }
  items.push({ mark: "denied", text: "denied" });
  if (c.lanes.some((l) => l.stats.errors > 0)) items.push({ mark: "error", text: "error: cost above capacity" });
  items.push({ mark: "state", text: "state right after each request" });
  if (c.lanes.some((l) => hasWindows(l.rule))) {
    items.push({ mark: "boundary", text: "window boundary" });
  }
  const out: string[] = [];
  let x = 16;
  for (const item of items) {
    if (item.mark === "state") {
      out.push(line(x - 6, y - 4, x + 8, y - 4, "#333333", 1.6));
    } else if (item.mark === "boundary") {
      out.push(
        `<line x1="${x + 1}" y1="${y - 11}" x2="${x + 1}" y2="${y + 3}" stroke="#444444" stroke-width="1.2" stroke-dasharray="5 3"/>`,
      );
    } else {
      out.push(mark(item.mark as RequestOutcome, x + 1, y - 4));
    }
    out.push(`<text x="${x + 14}" y="${y}" font-size="12">${esc(item.text)}</text>`);
    x += 30 + textWidth(item.text, 12);
  }
  return out;
}

/** One lane: the rule and its counts on the left, the key's state line, and the request marks. */
function drawLane(lane: Lane, y: number, c: Comparison, frame: Frame): string[] {
  const stateOf = c.stateKey !== null && c.keys > 1 ? ` (key ${c.stateKey})` : "";
  return [...laneLabels(lane, y), ...stateChart(lane, y, frame, stateOf), ...laneMarks(lane, y, frame)];
}

/** The rule's id and description, what it did, and the most it admitted in any span of its length. */
function laneLabels({ rule, stats }: Lane, y: number): string[] {
  const counts = [`${stats.admitted} allowed`, `${stats.denied} denied`];
  if (stats.delayed > 0) counts[0] += ` (${stats.delayed} delayed)`;
  if (stats.errors > 0) counts.push(`${stats.errors} errors`);
  const peak = stats.peak === null ? 0 : stats.peak.cost;
  return [
    `<text x="16" y="${y + 21}" font-size="14" font-weight="bold">${esc(rule.id)}</text>`,
    `<text x="16" y="${y + 38}" font-size="11" fill="#333333">${esc(describeRule(rule))}</text>`,
    `<text x="16" y="${y + 54}" font-size="11" fill="#333333">${esc(counts.join(", "))}</text>`,
    `<text x="16" y="${y + 69}" font-size="11" fill="#333333">${esc(`most in any ${formatSpan(stats.spanMs)}: ${peak}`)}</text>`,
  ];
}

/** The state line, scaled from 0 to the capacity (or higher, if a count_denied estimate goes above it). */
function stateChart(lane: Lane, y: number, { fromMs, toMs, xOf }: Frame, stateOf: string): string[] {
  const { rule } = lane;
  const points = stateLine(lane, xOf, fromMs, toMs);
  const capacity = capacityOf(rule);
  // A loop, not Math.max(...points): a busy key has more points than a call may have arguments.
  let top = capacity;
  for (const p of points) if (p.level > top) top = p.level;
  const yOf = (level: number) => y + STATE_BOTTOM - (level / top) * (STATE_BOTTOM - STATE_TOP);
  const out = [
    `<text x="16" y="${y + 94}" font-size="11" fill="#555555">${esc(`state: ${levelName(rule)}, 0 to ${trimNumber(top, 1)}${stateOf}`)}</text>`,
    line(PLOT_X0, y + STATE_BOTTOM, PLOT_X1, y + STATE_BOTTOM, "#999999", 1),
    `<line x1="${PLOT_X0}" y1="${n(yOf(capacity))}" x2="${PLOT_X1}" y2="${n(yOf(capacity))}" stroke="#999999" stroke-width="1" stroke-dasharray="2 3"/>`,
    `<text x="${PLOT_X1 - 3}" y="${n(yOf(capacity) - 3)}" font-size="10" text-anchor="end" fill="#555555">${esc(capacityLabel(rule))}</text>`,
  ];
  if (points.length > 0) {
    const coords = dedupe(points.map((p) => [xOf(p.tMs), yOf(p.level)] as const));
    const path = coords.map(([px, py], i) => `${i === 0 ? "M" : "L"}${n(px)} ${n(py)}`).join(" ");
    const first = coords[0]!;
    const last = coords[coords.length - 1]!;
    out.push(
      `<path d="${path} L${n(last[0])} ${y + STATE_BOTTOM} L${n(first[0])} ${y + STATE_BOTTOM} Z" fill="#000000" fill-opacity="0.07" stroke="none"/>`,
      `<path d="${path}" fill="none" stroke="#333333" stroke-width="1.6" stroke-linejoin="round"/>`,
    );
  }
  return out;
}

/** The requests of one pixel column with one outcome, drawn as one mark. */
interface MarkColumn {
  x: number;
  outcome: RequestOutcome;
  count: number;
  firstMs: number;
  oneInstant: boolean;
  releaseXs: number[];
}

/** Marks: one per pixel column and outcome; "×N" beside a column of N requests at one instant. */
function laneMarks(lane: Lane, y: number, frame: Frame): string[] {
  const columns = markColumns(lane, frame);
  const out: string[] = [];
  const lastLabelX = new Map<RequestOutcome, number>();
  const nextX = new Map<MarkColumn, number>();
  const seen = new Map<RequestOutcome, MarkColumn>();
  for (const b of columns) {
    const prev = seen.get(b.outcome);
    if (prev !== undefined) nextX.set(prev, b.x);
    seen.set(b.outcome, b);
  }
  for (const b of columns) {
    const rowY = y + ROW_Y[b.outcome];
    if (b.releaseXs.length > 0) {
      const far = b.releaseXs.reduce((a, x) => Math.max(a, x), b.x);
      out.push(line(b.x, rowY, far, rowY, COLOR.delayed, 1.2));
      for (const rx of new Set(b.releaseXs.map((r) => Math.round(r)))) {
        out.push(line(rx, rowY - 3, rx, rowY + 3, COLOR.delayed, 1.2));
      }
    }
    out.push(mark(b.outcome, b.x, rowY));
    // A label only where it has room: no other label or mark of its row within the next few pixels.
    const room = (nextX.get(b) ?? Number.POSITIVE_INFINITY) - b.x >= LABEL_ROOM_PX;
    if (b.count > 1 && b.oneInstant && room && b.x - (lastLabelX.get(b.outcome) ?? -1e9) >= LABEL_ROOM_PX) {
      out.push(
        `<text x="${b.x + 7}" y="${rowY + 4}" font-size="11" stroke="#f5f5f5" stroke-width="3" paint-order="stroke">×${b.count}</text>`,
      );
      lastLabelX.set(b.outcome, b.x);
    }
  }
  return out;
}

/** The lane's marks in the range, gathered per pixel column and outcome, left to right and in row order. */
function markColumns(lane: Lane, { fromMs, toMs, xOf }: Frame): MarkColumn[] {
  const columns = new Map<string, MarkColumn>();
  for (const m of lane.marks) {
    if (m.firstMs < fromMs || m.firstMs > toMs) continue;
    const x = Math.round(xOf(m.firstMs));
    const id = `${m.outcome}:${x}`;
    let b = columns.get(id);
    if (b === undefined) {
      b = { x, outcome: m.outcome, count: 0, firstMs: m.firstMs, oneInstant: true, releaseXs: [] };
      columns.set(id, b);
    }
    b.count += m.count;
    if (!m.oneInstant || m.firstMs !== b.firstMs) b.oneInstant = false;
    for (const r of m.releasesMs) b.releaseXs.push(Math.min(PLOT_X1, xOf(r)));
  }
  return [...columns.values()].sort((a, b) => a.x - b.x || rowOrder(a.outcome) - rowOrder(b.outcome));
}

function rowOrder(o: RequestOutcome): number {
  return ["allowed", "delayed", "denied", "error"].indexOf(o);
}

/**
 * The charted key's level over the range: sampled every few pixels, plus its value just before and just after every
 * one of its requests (several requests at one instant make one vertical step); for a long trace, the first,
 * lowest, highest and last of those per time bin, far narrower than a pixel.
 */
function stateLine(
  lane: Lane,
  xOf: (t: number) => number,
  fromMs: number,
  toMs: number,
): { tMs: number; level: number }[] {
  const { rule, track } = lane;
  const points: { tMs: number; level: number }[] = [];
  const pxMs = (toMs - fromMs) / Math.max(1, xOf(toMs) - xOf(fromMs));
  const stepMs = Math.max(1, pxMs * SAMPLE_PX);
  let k = 0;
  let state = null as Lane["track"][number]["endState"];
  let drawnToMs = Number.NEGATIVE_INFINITY;
  // Requests before the range only set the starting state.
  while (k < track.length && track[k]!.firstMs < fromMs) state = track[k++]!.endState;
  for (let i = 0; ; i++) {
    const g = Math.min(toMs, fromMs + i * stepMs);
    while (k < track.length && track[k]!.firstMs <= g) {
      const bin = track[k++]!;
      points.push(...bin.points);
      state = bin.endState;
      drawnToMs = bin.lastMs;
    }
    // A sample inside a bin already drawn would use the bin's final state too early.
    if (g >= drawnToMs) points.push({ tMs: g, level: levelAt(rule, state, g) });
    if (g >= toMs) break;
  }
  return points;
}

/**
 * Thins the line to at most four points per pixel column (first, lowest, highest, last, in their order), which
 * draws the same picture however many requests the key made, then drops repeats of the same rounded point.
 */
function dedupe(coords: (readonly [number, number])[]): (readonly [number, number])[] {
  const out: (readonly [number, number])[] = [];
  let i = 0;
  while (i < coords.length) {
    const column = Math.round(coords[i]![0]);
    let j = i;
    let lo = i;
    let hi = i;
    while (j < coords.length && Math.round(coords[j]![0]) === column) {
      if (coords[j]![1] < coords[lo]![1]) lo = j;
      if (coords[j]![1] > coords[hi]![1]) hi = j;
      j++;
    }
    for (const k of [...new Set([i, lo, hi, j - 1])].sort((a, b) => a - b)) {
      const c = coords[k]!;
      const prev = out[out.length - 1];
      if (prev !== undefined && n(prev[0]) === n(c[0]) && n(prev[1]) === n(c[1])) continue;
      out.push(c);
    }
    i = j;
  }
  return out;
}

function hasWindows(rule: ResolvedRule): boolean {
  return chartWindowOf(rule) !== null;
}

/** Window starts strictly inside (fromMs, toMs] for rules with an epoch-aligned window (`chartWindowOf`). */
export function boundaries(rule: ResolvedRule, fromMs: number, toMs: number): number[] {
  const out: number[] = [];
  const window = chartWindowOf(rule);
  if (window === null) return out;
  for (let i = windowIndex(window, fromMs) + 1; out.length <= MAX_BOUNDARY_LINES; i++) {
    const start = windowStartMs(window, i);
    if (start > toMs) break;
    out.push(start);
  }
  return out;
}

/** The four marks, defined once and placed with `<use>` (a dense trace has thousands of them). */
function markDefs(): string {
  const shapes: Record<RequestOutcome, string> = {
    allowed: `<circle id="mark-allowed" r="3.6" fill="${COLOR.allowed}"/>`,
    delayed: `<path id="mark-delayed" d="M-4 3.5 L4 3.5 L0 -4 Z" fill="${COLOR.delayed}"/>`,
    denied: `<path id="mark-denied" d="M-3.5 -3.5 L3.5 3.5 M-3.5 3.5 L3.5 -3.5" stroke="${COLOR.denied}" stroke-width="2" stroke-linecap="round"/>`,
    error: `<path id="mark-error" d="M0 -4.5 L4.5 0 L0 4.5 L-4.5 0 Z" fill="none" stroke="${COLOR.error}" stroke-width="1.5"/>`,
  };
  return `<defs>${Object.values(shapes).join("")}</defs>`;
}

function mark(outcome: RequestOutcome, x: number, y: number): string {
  return `<use href="#mark-${outcome}" x="${n(x)}" y="${n(y)}"/>`;
}

function line(x1: number, y1: number, x2: number, y2: number, color: string, width: number): string {
  return `<line x1="${n(x1)}" y1="${n(y1)}" x2="${n(x2)}" y2="${n(y2)}" stroke="${color}" stroke-width="${width}"/>`;
}

function describeFigure(c: Comparison, subtitle: string): string {
  const lanes = c.lanes.map(({ rule, stats }) => {
    const parts = [`${stats.admitted} allowed`, `${stats.denied} denied`];
    if (stats.delayed > 0) parts.push(`${stats.delayed} delayed`);
    if (stats.errors > 0) parts.push(`${stats.errors} errors`);
    return `${rule.id} (${describeRule(rule)}): ${parts.join(", ")}`;
  });
  return `${subtitle}. ${lanes.join("; ")}.`;
}

/** Rough text width for laying out the legend (average glyph of a sans-serif face). */
function textWidth(text: string, fontSize: number): number {
  return text.length * fontSize * 0.56;
}

/** A coordinate with at most one decimal. */
function n(v: number): string {
  return trimNumber(v, 1);
}

export function esc(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
