/**
 * One rule's lane of the comparison figure: its labels, the charted key's state line (scaled from 0 to the capacity)
 * and the request marks, gathered per pixel column so a dense trace draws the same picture in bounded size.
 */
import { capacityLabel, capacityOf, levelAt, levelName } from "../algorithms/index.ts";
import { type Comparison, describeRule, type Lane, type RequestOutcome } from "../replay/run.ts";
import { formatSpan, trimNumber } from "../replay/time.ts";
import {
  COLOR,
  esc,
  type Frame,
  line,
  mark,
  n,
  PLOT_X0,
  PLOT_X1,
  ROW_Y,
  STATE_BOTTOM,
  STATE_TOP,
} from "./svg_primitives.ts";

/** One sample of the state line every this many px (plus one before and after every request). */
const SAMPLE_PX = 2;
/** Room a "×N" count label needs to the right of its mark. */
const LABEL_ROOM_PX = 34;

/** One lane: the rule and its counts on the left, the key's state line, and the request marks. */
export function drawLane(lane: Lane, y: number, c: Comparison, frame: Frame): string[] {
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
