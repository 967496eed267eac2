/**
 * NGINX's `limit_req` arithmetic, as ngx_http_limit_req_module.c does it, where it differs from Sluice's exact
 * `leaky_queue`: a zone's rate is stored as whole requests per 1000 s (`N r/m` is `N × 1000 / 60`, rounded down),
 * and each admitted request moves the key's clock to now while what leaked since the last admission is rounded down
 * to whole thousandths of a request. `nginxRequest` replays that arithmetic, so the differential test
 * (scripts/nginx-differential.ts) predicts from the request times alone where NGINX and Sluice decide differently.
 */

/** The rate NGINX keeps, in requests per 1000 s. */
export function nginxStoredRate(amount: number, unit: "s" | "min"): number {
  return Math.floor((amount * 1000) / (unit === "s" ? 1 : 60));
}

/** How far apart NGINX admits requests at a steady pace, ms (the smallest gap that leaks one whole request). */
export function nginxIntervalMs(amount: number, unit: "s" | "min"): number {
  return Math.ceil(1_000_000 / nginxStoredRate(amount, unit));
}

/** A zone of `amount` requests per second or minute with exact arithmetic (no rounding: what Sluice admits). */
export function exactZone(amount: number, unit: "s" | "min"): NginxZone {
  const seconds = unit === "s" ? 1 : 60;
  return new NginxZone(amount * 1000, seconds);
}

/** What the report says about a zone's rate: nothing for `r/s`, the two roundings for an `r/m` that does not divide. */
export function nginxRateNotes(amount: number, unit: "s" | "min"): string[] {
  if (unit === "s") return [];
  const stored = nginxStoredRate(amount, unit);
  const exactMs = 60_000 / amount;
  const notes: string[] = [];
  if ((amount * 1000) % 60 !== 0) {
    notes.push(
      `NGINX rounds ${amount}r/m down to ${stored} requests per 1000 s, so it admits one request every ` +
        `${fmt(nginxIntervalMs(amount, unit))} ms where Sluice's exact ${amount}/min admits one every ${fmt(exactMs)} ms`,
    );
  }
  const silentMs = Math.ceil(1000 / stored);
  if (silentMs > 1) {
    notes.push(
      `NGINX rounds down what leaked since the last admitted request and moves its clock to now: admissions less ` +
        `than ${silentMs} ms apart leak nothing (Sluice keeps the fraction)`,
    );
  }
  return notes;
}

function fmt(ms: number): string {
  const rounded = Math.round(ms * 10) / 10;
  return rounded.toLocaleString("en-US", { maximumFractionDigits: 1 });
}

/** NGINX's answer to one request. */
export interface NginxAnswer {
  readonly allowed: boolean;
  /** How long NGINX holds an admitted request, ms. */
  readonly delayMs: number;
}

/**
 * One `limit_req_zone`'s per-key state, with NGINX's arithmetic: excess in thousandths of a request, last admission.
 * With `scale` (`exactZone`), in thousandths over `scale`, so that a rate NGINX rounds is whole: exact arithmetic, as
 * Sluice's, to tell NGINX's roundings from other differences.
 */
export class NginxZone {
  private readonly nodes = new Map<string, { excess: number; last: number }>();
  /** One request, in the zone's units of excess. */
  private readonly one: number;

  /** `rate`: requests per 1000 s (`nginxStoredRate`), times `scale`. */
  constructor(
    readonly rate: number,
    readonly scale = 1,
  ) {
    this.one = 1000 * scale;
  }

  /** A copy, to try a request at other times without changing this zone. */
  clone(): NginxZone {
    const copy = new NginxZone(this.rate, this.scale);
    for (const [key, node] of this.nodes) copy.nodes.set(key, { ...node });
    return copy;
  }

  /** The excess a request at `nowMs` would leave (`ngx_http_limit_req_lookup`), or `null` when over `burst`. */
  excessAt(key: string, nowMs: number, burst: number): number | null {
    const node = this.nodes.get(key);
    if (node === undefined) return 0;
    const excess = Math.max(0, node.excess - Math.trunc((this.rate * elapsed(node.last, nowMs)) / 1000) + this.one);
    return excess > burst * this.one ? null : excess;
  }

  /** When the key's clock was last moved (its last admission), or `null` for a new key. */
  lastMs(key: string): number | null {
    return this.nodes.get(key)?.last ?? null;
  }

  /** Charge the request (`ngx_http_limit_req_account`): the excess is stored and the clock moves to now. */
  account(key: string, nowMs: number, excess: number): void {
    const node = this.nodes.get(key);
    if (node === undefined) this.nodes.set(key, { excess, last: nowMs });
    else {
      if (elapsed(node.last, nowMs) !== 0) node.last = nowMs;
      node.excess = excess;
    }
  }
}

function elapsed(lastMs: number, nowMs: number): number {
  const ms = nowMs - lastMs;
  return ms < -60_000 ? 1 : Math.max(0, ms);
}

/** A `limit_req` in a location: its zone, `burst` and `delay` (`nodelay`: `burst`). */
export interface NginxLimit {
  readonly zone: NginxZone;
  readonly burst: number;
  readonly delay: number;
  /** The request's key in this limit's zone, when it is not the one `nginxRequest` is given; `""` skips the limit. */
  readonly key?: string;
}

/**
 * One request through a location's `limit_req` directives, as ngx_http_limit_req_handler does it: every limit is
 * looked up first; one over its burst denies and none is charged; else every limit is charged, and the request waits
 * for the longest delay among them.
 */
export function nginxRequest(all: readonly NginxLimit[], key: string, nowMs: number): NginxAnswer {
  // NGINX skips a limit whose key is empty (ngx_http_limit_req_handler).
  const limits = all.filter((l) => (l.key ?? key) !== "");
  const excesses: number[] = [];
  for (const limit of limits) {
    const excess = limit.zone.excessAt(limit.key ?? key, nowMs, limit.burst);
    if (excess === null) return { allowed: false, delayMs: 0 };
    excesses.push(excess);
  }
  let delayMs = 0;
  limits.forEach((limit, i) => {
    const excess = excesses[i]!;
    limit.zone.account(limit.key ?? key, nowMs, excess);
    const over = excess - limit.delay * 1000 * limit.zone.scale;
    if (over > 0) delayMs = Math.max(delayMs, Math.trunc((over * 1000) / limit.zone.rate));
  });
  return { allowed: true, delayMs };
}
