/**
 * The comparison as a plain SVG figure, as in docs/examples/ (docs/rules.md shows one): one lane per
 * rule, each request marked allowed, delayed or denied (by color and by shape, so it reads in grey scale and for
 * color-blind readers), the charted key's state as a line underneath, window boundaries, a time axis and a legend.
 *
 * Pure and deterministic: the same comparison and options give the same bytes (no dates, no randomness, numbers
 * rounded to 0.1 px), so generated figures can be committed and checked for drift.
 */

import { chartWindowOf } from "../algorithms/index.ts";
import { windowIndex, windowStartMs } from "../algorithms/windows.ts";
import { type Comparison, describeRule, type RequestOutcome } from "../replay/run.ts";
import { formatTick, type TimeStyle, tickStep, ticks } from "../replay/time.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { drawLane } from "./svg_lane.ts";
import {
  esc,
  FONT,
  type Frame,
  INSET,
  LANE_GAP,
  LANE_HEIGHT,
  LANES_TOP,
  laneTop,
  line,
  mark,
  markDefs,
  n,
  PLOT_X0,
  PLOT_X1,
  textWidth,
  WIDTH,
} from "./svg_primitives.ts";

export interface SvgOptions {
  readonly title: string;
  /** A line under the title; default: the trace's size and which key the state lines follow. */
  readonly subtitle?: string;
  readonly style: TimeStyle;
  /** The time range drawn, ms. Requests outside it are not drawn (they still count in the lane summaries). */
  readonly fromMs: number;
  readonly toMs: number;
}

/** Above this many boundaries in the range, window boundary lines are left out (they would be a grey wash). */
const MAX_BOUNDARY_LINES = 60;
const MAX_BOUNDARY_LABELS = 6;

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

function describeFigure(c: Comparison, subtitle: string): string {
  const lanes = c.lanes.map(({ rule, stats }) => {
    const parts = [`${stats.admitted} allowed`, `${stats.denied} denied`];
    if (stats.delayed > 0) parts.push(`${stats.delayed} delayed`);
    if (stats.errors > 0) parts.push(`${stats.errors} errors`);
    return `${rule.id} (${describeRule(rule)}): ${parts.join(", ")}`;
  });
  return `${subtitle}. ${lanes.join("; ")}.`;
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
