/**
 * A `geo` block's lines as CIDR ranges and their values: `default`, CIDRs and addresses as written; with `ranges`,
 * each `start-end` as the CIDR blocks that cover it exactly (IPv4, as NGINX's ranges are); `proxy` and
 * `proxy_recursive` (which addresses are proxies whose X-Forwarded-For NGINX reads the client from) change nothing on
 * Cloudflare, whose CF-Connecting-IP is the client already, and are noted. `delete`, overlapping ranges and anything
 * else are refused with the reason.
 */
import type { Directive } from "./nginx_conf.ts";

/** The ranges (CIDR text) with their geo values, the default value, and what the report says of the rest. */
export type GeoLines =
  | {
      readonly entries: readonly { value: string; result: string }[];
      readonly fallback: string;
      readonly notes: string[];
    }
  | { readonly refused: string };

const V4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function word(text: string): number | null {
  const m = V4.exec(text);
  if (m === null || m.slice(1).some((o) => Number(o) > 255)) return null;
  return m.slice(1).reduce((w, o) => w * 256 + Number(o), 0);
}

const text = (w: number) => [w >>> 24, (w >>> 16) & 255, (w >>> 8) & 255, w & 255].join(".");

/** The CIDR blocks that cover `start`..`end` (IPv4, both included) exactly, largest first where they can be. */
export function rangeToCidrs(start: number, end: number): string[] {
  const out: string[] = [];
  let at = start;
  while (at <= end) {
    let bits = 32;
    // Grow the block while `at` is aligned to it and it stays within the range.
    while (bits > 0) {
      const size = 2 ** (33 - bits);
      if (at % size !== 0 || at + size - 1 > end) break;
      bits--;
    }
    out.push(`${text(at)}/${bits}`);
    at += 2 ** (32 - bits);
  }
  return out;
}

/** A geo block's lines, read as NGINX reads them. */
export function geoLines(lines: readonly Directive[]): GeoLines {
  const ranges = lines.some((l) => l.name === "ranges" && l.args.length === 0);
  const notes: string[] = [];
  const entries: { value: string; result: string }[] = [];
  const spans: [number, number][] = [];
  let fallback = "";
  for (const line of lines) {
    if (line.name === "ranges" && line.args.length === 0) continue;
    if (line.name === "proxy" || line.name === "proxy_recursive") {
      const what =
        "NGINX reads the client from X-Forwarded-For behind these proxies; on Cloudflare CF-Connecting-IP is the client already";
      if (!notes.some((n) => n.startsWith("its proxy"))) notes.push(`its proxy lines: ${what}`);
      continue;
    }
    if (line.args.length !== 1 || line.name === "delete" || line.name === "include")
      return { refused: `its \`${line.name}\` is not read here; write its ranges as CIDRs to import it` };
    if (line.name === "default") {
      fallback = line.args[0]!;
      continue;
    }
    const result = line.args[0]!;
    const dash = ranges ? /^([\d.]+)-([\d.]+)$/.exec(line.name) : null;
    if (ranges && dash === null) return { refused: `its ${line.name} is not a start-end range, which ranges needs` };
    if (dash === null) {
      entries.push({ value: line.name, result });
      continue;
    }
    const [start, end] = [word(dash[1]!), word(dash[2]!)];
    if (start === null || end === null || start > end) return { refused: `its ${line.name} is not an IPv4 range` };
    if (spans.some(([a, b]) => start <= b && a <= end))
      return {
        refused: `its ${line.name} overlaps another of its ranges (NGINX lets the later one win, with a warning)`,
      };
    spans.push([start, end]);
    for (const cidr of rangeToCidrs(start, end)) entries.push({ value: cidr, result });
  }
  return { entries, fallback, notes };
}
