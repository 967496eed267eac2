/**
 * A `geo` block's lines as CIDR ranges and their values: `default`, CIDRs and addresses as written; with `ranges`,
 * each `start-end` as the CIDR blocks that cover it exactly (IPv4, as NGINX's ranges are); `proxy` and
 * `proxy_recursive` (which addresses are proxies whose X-Forwarded-For NGINX reads the client from) change nothing on
 * Cloudflare, whose CF-Connecting-IP is the client already, and are noted. `delete` and a network given twice as
 * NGINX applies them; overlapping ranges and anything else are refused with the reason.
 */
import { addressGroups, parseAddressRange } from "../rules/address_range.ts";
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
  const book = ranges ? new RangeBook() : new NetworkBook();
  let fallback = "";
  for (const line of lines) {
    if (line.name === "ranges" && line.args.length === 0) continue;
    if (line.name === "proxy" || line.name === "proxy_recursive") {
      const what =
        "NGINX reads the client from X-Forwarded-For behind these proxies; on Cloudflare CF-Connecting-IP is the client already";
      if (!notes.some((n) => n.startsWith("its proxy"))) notes.push(`its proxy lines: ${what}`);
      continue;
    }
    if (line.args.length !== 1 || line.name === "include")
      return { refused: `its \`${line.name}\` is not read here; write its ranges as CIDRs to import it` };
    if (line.name === "default") {
      fallback = line.args[0]!;
      continue;
    }
    const refused = line.name === "delete" ? book.delete(line.args[0]!, notes) : book.add(line.name, line.args[0]!);
    if (refused !== null) return { refused };
  }
  return { entries: book.entries(), fallback, notes };
}

/** A geo's own way to hold its lines: networks (the default) or, with `ranges`, start-end ranges. */
interface GeoBook {
  /** Adds a line; why it cannot be read, or `null`. */
  add(net: string, result: string): string | null;
  /** A `delete` line, as NGINX applies it to the lines above it; why it cannot be read, or `null`. */
  delete(net: string, notes: string[]): string | null;
  entries(): { value: string; result: string }[];
}

/**
 * Networks, as NGINX's radix tree holds them (ngx_http_geo_module.c, `ngx_http_geo_cidr`): a network given twice
 * keeps the later value (NGINX warns "duplicate network"); `delete NET` removes the network written exactly so above
 * (as the same address and prefix length), and one not there changes nothing (NGINX warns "no network to delete").
 * `0.0.0.0/0` and `::/0` are where NGINX keeps the `default`, so deleting them is not read here.
 */
class NetworkBook implements GeoBook {
  private readonly held = new Map<string, { value: string; result: string }>();

  add(net: string, result: string): string | null {
    this.held.set(networkOf(net), { value: net, result });
    return null;
  }

  delete(net: string, notes: string[]): string | null {
    const key = networkOf(net);
    if (/\/0+$/.test(net.trim())) return `its delete ${net} deletes its default, which is not read here`;
    if (!this.held.delete(key)) notes.push(`its delete ${net}: no such network above it, so nothing (NGINX warns too)`);
    return null;
  }

  entries(): { value: string; result: string }[] {
    return [...this.held.values()];
  }
}

/** A network's identity: its address groups and prefix length (`10.0.0.1/8` is `10.0.0.0/8`, as NGINX masks it). */
function networkOf(net: string): string {
  const range = parseAddressRange(net);
  if (!("error" in range)) return `${range.groups.join(":")}/${range.bits}`;
  const [address = "", length] = net.split("/");
  const groups = addressGroups(address);
  if (groups === null || length === undefined || !/^\d{1,3}$/.test(length)) return net;
  const bits = Number(length) + (address.includes(":") ? 0 : 96);
  const masked = groups.map((g, i) => {
    const left = bits - i * 16;
    return left >= 16 ? g : left <= 0 ? 0 : g & ((0xffff << (16 - left)) & 0xffff);
  });
  return `${masked.join(":")}/${bits}`;
}

/**
 * Start-end ranges, as NGINX's `ranges` holds them (`ngx_http_geo_add_range`, `ngx_http_geo_delete_range`): each cut
 * at every /16 boundary into pieces; `delete start-end` cuts its range the same way and removes each piece that
 * equals one held, so it can take a whole range, or the /16s of one it spans exactly. Overlapping ranges are refused
 * (NGINX lets the later win, with a warning).
 */
class RangeBook implements GeoBook {
  private pieces: { start: number; end: number; result: string }[] = [];

  add(net: string, result: string): string | null {
    const span = spanOf(net);
    if (typeof span === "string") return span;
    const [start, end] = span;
    if (this.pieces.some((p) => start <= p.end && p.start <= end))
      return `its ${net} overlaps another of its ranges (NGINX lets the later one win, with a warning)`;
    for (const [a, b] of cut(start, end)) this.pieces.push({ start: a, end: b, result });
    return null;
  }

  delete(net: string, notes: string[]): string | null {
    const span = spanOf(net);
    if (typeof span === "string") return span;
    let missed = false;
    for (const [a, b] of cut(span[0], span[1])) {
      const at = this.pieces.findIndex((p) => p.start === a && p.end === b);
      if (at < 0) missed = true;
      else this.pieces.splice(at, 1);
    }
    if (missed)
      notes.push(`its delete ${net}: a part of it is no range above it, so that part stays (NGINX warns too)`);
    return null;
  }

  /** The pieces in order, those that touch with the same value joined again, as the CIDR blocks that cover each. */
  entries(): { value: string; result: string }[] {
    const sorted = [...this.pieces].sort((x, y) => x.start - y.start);
    const joined: { start: number; end: number; result: string }[] = [];
    for (const p of sorted) {
      const last = joined.at(-1);
      if (last !== undefined && last.end + 1 === p.start && last.result === p.result) last.end = p.end;
      else joined.push({ ...p });
    }
    return joined.flatMap((p) => rangeToCidrs(p.start, p.end).map((value) => ({ value, result: p.result })));
  }
}

/** A `ranges` line's start and end, or why it is not one. */
function spanOf(net: string): [number, number] | string {
  const dash = /^([\d.]+)-([\d.]+)$/.exec(net);
  if (dash === null) return `its ${net} is not a start-end range, which ranges needs`;
  const [start, end] = [word(dash[1]!), word(dash[2]!)];
  if (start === null || end === null || start > end) return `its ${net} is not an IPv4 range`;
  return [start, end];
}

/** `start`..`end` cut at every /16 boundary, as NGINX stores a range. */
function cut(start: number, end: number): [number, number][] {
  const out: [number, number][] = [];
  for (let at = start; at <= end; at = Math.floor(at / 0x10000) * 0x10000 + 0x10000) {
    out.push([at, Math.min(end, Math.floor(at / 0x10000) * 0x10000 + 0xffff)]);
  }
  return out;
}
