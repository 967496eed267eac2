/**
 * NGINX's `limit_req` arithmetic, as ngx_http_limit_req_module.c does it, where it differs from Sluice's exact
 * `leaky_queue`: a zone's rate is stored as whole requests per 1000 s (`N r/m` is `N × 1000 / 60`, rounded down),
 * and each admitted request moves the key's clock to now while what leaked since the last admission is rounded down
 * to whole thousandths of a request. `NginxLimitModel` replays that arithmetic, so a differential test can predict,
 * before it sends anything, where NGINX and Sluice will decide differently.
 */

/** The rate NGINX keeps, in requests per 1000 s. */
export function nginxStoredRate(amount: number, unit: "s" | "min"): number {
  return Math.floor((amount * 1000) / (unit === "s" ? 1 : 60));
}

/** How far apart NGINX admits requests at a steady pace, ms (the smallest gap that leaks one whole request). */
export function nginxIntervalMs(amount: number, unit: "s" | "min"): number {
  return Math.ceil(1_000_000 / nginxStoredRate(amount, unit));
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

/** One `limit_req` with NGINX's arithmetic. */
export interface NginxLimit {
  /** Requests per 1000 s (`nginxStoredRate`). */
  readonly rate: number;
  readonly burst: number;
  /** Requests beyond this many in excess wait (`nodelay`: `burst`). */
  readonly delay: number;
}

export interface NginxAnswer {
  readonly allowed: boolean;
  /** How long NGINX holds an admitted request, ms. */
  readonly delayMs: number;
}

/** NGINX's per-key state for one zone: the excess in thousandths of a request and the last admission's time. */
export class NginxLimitModel {
  private readonly nodes = new Map<string, { excess: number; last: number }>();

  constructor(private readonly limit: NginxLimit) {}

  /** `ngx_http_limit_req_lookup` with `account` set, then the handler's delay. */
  request(key: string, nowMs: number): NginxAnswer {
    const node = this.nodes.get(key);
    const { rate, burst, delay } = this.limit;
    if (node === undefined) {
      this.nodes.set(key, { excess: 0, last: nowMs });
      return { allowed: true, delayMs: 0 };
    }
    let ms = nowMs - node.last;
    if (ms < -60_000) ms = 1;
    else if (ms < 0) ms = 0;
    let excess = node.excess - Math.trunc((rate * ms) / 1000) + 1000;
    if (excess < 0) excess = 0;
    if (excess > burst * 1000) return { allowed: false, delayMs: 0 };
    node.excess = excess;
    if (ms !== 0) node.last = nowMs;
    const over = excess - delay * 1000;
    return { allowed: true, delayMs: over <= 0 ? 0 : Math.trunc((over * 1000) / rate) };
  }
}
