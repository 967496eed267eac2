/** The figure's geometry and colors, shared by its parts, and the SVG primitives they draw with. */
import type { RequestOutcome } from "../replay/run.ts";
import { type TimeStyle, trimNumber } from "../replay/time.ts";

/** Okabe–Ito colors: distinguishable with every common color-vision deficiency. */
export const COLOR: Readonly<Record<RequestOutcome, string>> = {
  allowed: "#0072B2",
  delayed: "#E69F00",
  denied: "#D55E00",
  error: "#555555",
};

export const FONT = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
export const WIDTH = 1000;
export const PLOT_X0 = 250;
export const PLOT_X1 = WIDTH - 24;
/** Space inside the plot's ends, so marks at the first and last instant are drawn whole. */
export const INSET = 10;
export const LANES_TOP = 104;
export const LANE_HEIGHT = 122;
export const LANE_GAP = 10;
/** Mark rows, from a lane's top. */
export const ROW_Y: Readonly<Record<RequestOutcome, number>> = { allowed: 16, delayed: 31, denied: 46, error: 46 };
export const STATE_TOP = 60;
export const STATE_BOTTOM = 110;

/** Where things go: the time range, its x scale, and where the axis sits. */
export interface Frame {
  readonly fromMs: number;
  readonly toMs: number;
  readonly style: TimeStyle;
  readonly xOf: (t: number) => number;
  readonly axisY: number;
}

export function laneTop(i: number): number {
  return LANES_TOP + i * (LANE_HEIGHT + LANE_GAP);
}

/** The four marks, defined once and placed with `<use>` (a dense trace has thousands of them). */
export function markDefs(): string {
  const shapes: Record<RequestOutcome, string> = {
    allowed: `<circle id="mark-allowed" r="3.6" fill="${COLOR.allowed}"/>`,
    delayed: `<path id="mark-delayed" d="M-4 3.5 L4 3.5 L0 -4 Z" fill="${COLOR.delayed}"/>`,
    denied: `<path id="mark-denied" d="M-3.5 -3.5 L3.5 3.5 M-3.5 3.5 L3.5 -3.5" stroke="${COLOR.denied}" stroke-width="2" stroke-linecap="round"/>`,
    error: `<path id="mark-error" d="M0 -4.5 L4.5 0 L0 4.5 L-4.5 0 Z" fill="none" stroke="${COLOR.error}" stroke-width="1.5"/>`,
  };
  return `<defs>${Object.values(shapes).join("")}</defs>`;
}

export function mark(outcome: RequestOutcome, x: number, y: number): string {
  return `<use href="#mark-${outcome}" x="${n(x)}" y="${n(y)}"/>`;
}

export function line(x1: number, y1: number, x2: number, y2: number, color: string, width: number): string {
  return `<line x1="${n(x1)}" y1="${n(y1)}" x2="${n(x2)}" y2="${n(y2)}" stroke="${color}" stroke-width="${width}"/>`;
}

/** Rough text width for laying out the legend (average glyph of a sans-serif face). */
export function textWidth(text: string, fontSize: number): number {
  return text.length * fontSize * 0.56;
}

/** A coordinate with at most one decimal. */
export function n(v: number): string {
  return trimNumber(v, 1);
}

export function esc(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
