/**
 * `sluice plan --svg`: the flips of a replay over time, one lane per replayed rule: bars up for requests the new
 * rules deny that the old ones allowed, bars down for the reverse. Pure and deterministic (numbers rounded to 0.1 px).
 */
import type { Replay } from "../replay/flips.ts";
import { formatTick, type TimeStyle, ticks, trimNumber } from "../replay/time.ts";
import { esc } from "./svg_primitives.ts";

const WIDTH = 1000;
const PLOT_X0 = 220;
const PLOT_X1 = WIDTH - 24;
const TOP = 84;
const LANE_HEIGHT = 96;
const LANE_GAP = 10;
const TO_DENIED = "#D55E00";
const TO_ALLOWED = "#0072B2";
const FONT = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";

export function renderPlanSvg(replay: Replay, title: string, style: TimeStyle): string {
  const fromMs = replay.firstMs ?? 0;
  const toMs = Math.max(fromMs + 1, replay.lastMs ?? fromMs + 1);
  const xOf = (t: number) => PLOT_X0 + ((t - fromMs) / (toMs - fromMs)) * (PLOT_X1 - PLOT_X0);
  const lanes = replay.lanes;
  const axisY = TOP + Math.max(1, lanes.length) * (LANE_HEIGHT + LANE_GAP);
  const height = axisY + 48;
  let top = 1;
  const columns = lanes.map((lane) => {
    // Bins far narrower than a pixel are summed per pixel column, so the figure stays small for any trace.
    const byX = new Map<number, { up: number; down: number }>();
    for (const [index, f] of lane.histogram.bins) {
      const x = Math.round(xOf(index * lane.histogram.widthMs));
      const c = byX.get(x) ?? { up: 0, down: 0 };
      c.up += f.allowedToDenied;
      c.down += f.deniedToAllowed;
      byX.set(x, c);
      top = Math.max(top, c.up, c.down);
    }
    return [...byX].sort((a, b) => a[0] - b[0]);
  });
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${height}" width="${WIDTH}" height="${height}" role="img" aria-labelledby="title">`,
    `<title id="title">${esc(title)}</title>`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<g font-family="${FONT}" fill="#222222">`,
    `<text x="16" y="28" font-size="17" font-weight="bold">${esc(title)}</text>`,
    `<text x="16" y="48" font-size="12" fill="#444444">${esc(`${replay.requests} requests, ${replay.keys} keys; bars: flips per pixel column (most ${top})`)}</text>`,
    `<rect x="16" y="60" width="10" height="10" fill="${TO_DENIED}"/><text x="32" y="69" font-size="12">allowed before, denied after (up)</text>`,
    `<rect x="260" y="60" width="10" height="10" fill="${TO_ALLOWED}"/><text x="276" y="69" font-size="12">denied before, allowed after (down)</text>`,
  ];
  lanes.forEach((lane, i) => {
    const y = TOP + i * (LANE_HEIGHT + LANE_GAP);
    const mid = y + LANE_HEIGHT / 2;
    const scale = (LANE_HEIGHT / 2 - 6) / top;
    out.push(
      `<rect x="8" y="${y}" width="${WIDTH - 16}" height="${LANE_HEIGHT}" rx="4" fill="#f5f5f5"/>`,
      `<text x="16" y="${y + 22}" font-size="14" font-weight="bold">${esc(lane.pair.id)}</text>`,
      `<text x="16" y="${y + 40}" font-size="11" fill="#333333">${esc(`${lane.flips.allowedToDenied} allowed -> denied`)}</text>`,
      `<text x="16" y="${y + 55}" font-size="11" fill="#333333">${esc(`${lane.flips.deniedToAllowed} denied -> allowed`)}</text>`,
      `<line x1="${PLOT_X0}" y1="${mid}" x2="${PLOT_X1}" y2="${mid}" stroke="#999999" stroke-width="1"/>`,
    );
    for (const [x, c] of columns[i]!) {
      if (c.up > 0) out.push(bar(x, mid - c.up * scale, c.up * scale, TO_DENIED));
      if (c.down > 0) out.push(bar(x, mid, c.down * scale, TO_ALLOWED));
    }
  });
  out.push(`<line x1="${PLOT_X0}" y1="${axisY}" x2="${PLOT_X1}" y2="${axisY}" stroke="#222222" stroke-width="1"/>`);
  for (const t of ticks(fromMs, toMs)) {
    out.push(
      `<text x="${n(xOf(t))}" y="${axisY + 18}" font-size="11" text-anchor="middle">${esc(formatTick(t, style))}</text>`,
    );
  }
  out.push(
    `<text x="${n((PLOT_X0 + PLOT_X1) / 2)}" y="${axisY + 38}" font-size="12" text-anchor="middle" fill="#444444">${style === "clock" ? "time of day (UTC)" : "time (s)"}</text>`,
    "</g>",
    "</svg>",
  );
  return `${out.join("\n")}\n`;
}

function bar(x: number, y: number, h: number, color: string): string {
  return `<rect x="${n(x - 0.5)}" y="${n(y)}" width="1.4" height="${n(Math.max(0.5, h))}" fill="${color}"/>`;
}

function n(v: number): string {
  return trimNumber(v, 1);
}
