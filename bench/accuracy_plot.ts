/**
 * The accuracy-against-k figure (docs/sliding-counter-buckets.svg), drawn from bench/results/accuracy.json by
 * bench/report.ts: one line per profile, wrongly admitted (solid) and wrongly denied (dashed), k on a log axis.
 */

export interface BucketsPoint {
  readonly profile: string;
  readonly buckets: number;
  readonly wronglyAdmittedPct: number;
  readonly wronglyDeniedPct: number;
}

const W = 640;
const H = 360;
const PAD = { left: 56, right: 150, top: 36, bottom: 44 };
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"];

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");

/** An SVG line chart of both error shares against k, per profile. */
export function bucketsSvg(points: readonly BucketsPoint[], caption: string): string {
  const ks = [...new Set(points.map((p) => p.buckets))].sort((a, b) => a - b);
  const profiles = [...new Set(points.map((p) => p.profile))];
  const maxPct = Math.max(1, ...points.flatMap((p) => [p.wronglyAdmittedPct, p.wronglyDeniedPct]));
  const top = Math.ceil(maxPct / 5) * 5;
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const logMax = Math.log(Math.max(2, ...ks));
  const x = (k: number) => PAD.left + (Math.log(k) / logMax) * plotW;
  const y = (pct: number) => PAD.top + plotH - (pct / top) * plotH;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${PAD.left}" y="20" font-size="13">${esc(caption)}</text>`,
  ];
  for (let pct = 0; pct <= top; pct += top / 5) {
    out.push(
      `<line x1="${PAD.left}" x2="${PAD.left + plotW}" y1="${y(pct)}" y2="${y(pct)}" stroke="#ddd"/>`,
      `<text x="${PAD.left - 6}" y="${y(pct) + 4}" text-anchor="end">${pct}%</text>`,
    );
  }
  for (const k of ks)
    out.push(
      `<line x1="${x(k)}" x2="${x(k)}" y1="${PAD.top}" y2="${PAD.top + plotH}" stroke="#eee"/>`,
      `<text x="${x(k)}" y="${PAD.top + plotH + 16}" text-anchor="middle">${k}</text>`,
    );
  out.push(
    `<text x="${PAD.left + plotW / 2}" y="${H - 8}" text-anchor="middle">buckets k (log scale)</text>`,
    `<text transform="translate(14 ${PAD.top + plotH / 2}) rotate(-90)" text-anchor="middle">share of all requests</text>`,
  );
  profiles.forEach((profile, i) => {
    const color = COLORS[i % COLORS.length]!;
    const rows = points.filter((p) => p.profile === profile).sort((a, b) => a.buckets - b.buckets);
    for (const [field, dash] of [
      ["wronglyAdmittedPct", ""],
      ["wronglyDeniedPct", ' stroke-dasharray="5 3"'],
    ] as const) {
      const path = rows.map((r) => `${x(r.buckets).toFixed(1)},${y(r[field]).toFixed(1)}`).join(" ");
      out.push(`<polyline points="${path}" fill="none" stroke="${color}" stroke-width="2"${dash}/>`);
    }
    const ly = PAD.top + 14 + i * 18;
    out.push(
      `<line x1="${W - PAD.right + 12}" x2="${W - PAD.right + 32}" y1="${ly - 4}" y2="${ly - 4}" stroke="${color}" stroke-width="2"/>`,
      `<text x="${W - PAD.right + 38}" y="${ly}">${esc(profile)}</text>`,
    );
  });
  const ly = PAD.top + 14 + profiles.length * 18 + 10;
  out.push(
    `<line x1="${W - PAD.right + 12}" x2="${W - PAD.right + 32}" y1="${ly - 4}" y2="${ly - 4}" stroke="#333" stroke-width="2"/>`,
    `<text x="${W - PAD.right + 38}" y="${ly}">wrongly admitted</text>`,
    `<line x1="${W - PAD.right + 12}" x2="${W - PAD.right + 32}" y1="${ly + 14}" y2="${ly + 14}" stroke="#333" stroke-width="2" stroke-dasharray="5 3"/>`,
    `<text x="${W - PAD.right + 38}" y="${ly + 18}">wrongly denied</text>`,
    "</svg>",
  );
  return `${out.join("\n")}\n`;
}
