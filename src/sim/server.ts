/**
 * One simulated Durable Object's capacity, for bench/cluster.ts and tests: a single server that takes `serviceMs` per
 * call plus `perKbMs` per KB of what the call carries and of the record it writes (so a large record or a large batch
 * costs the object on every call, refunds and share renewals included), and rejects a call with `overloaded` when its
 * backlog is already `maxBacklog` calls long (Cloudflare documents a soft limit of about 1,000 requests/s per
 * object). `restart()` models the object being reset: calls in the next `downMs` fail with `durableObjectReset`.
 *
 * A call's work runs when the server gets to it; work that awaits (a delegate asking the key's object) holds no
 * server time meanwhile, as a Durable Object awaiting an outgoing call serves other requests.
 */
import type { EventClock } from "./event_clock.ts";
import type { Link } from "./network.ts";

export interface SimServerOptions {
  /** Time the object spends on one call, ms (1 => at most 1,000 calls/s). */
  readonly serviceMs: number;
  /** Calls waiting beyond which a new call is rejected as overloaded. */
  readonly maxBacklog: number;
  /** Time per KB of the call's input and of the record it stores, ms (default 0). */
  readonly perKbMs?: number;
  /** Whether a message (the call, or its answer) is lost on the way (default: never). */
  readonly lose?: () => boolean;
}

export interface SimServerCounters {
  /** Calls served (every kind: checks, refunds, share renewals). */
  calls: number;
  overloaded: number;
  /** Calls refused while the object was restarting. */
  resets: number;
  /** Bytes of call inputs and stored records the object handled. */
  bytes: number;
}

export class SimServer {
  readonly counters: SimServerCounters = { calls: 0, overloaded: 0, resets: 0, bytes: 0 };
  /** When each served call was applied, ms (for calls per second). */
  readonly appliedAtMs: number[] = [];
  /** When the server is next free, ms. */
  private freeAtMs = 0;
  /** Until when calls fail as reset (a restart), ms. */
  private downUntilMs = 0;

  constructor(
    private readonly clock: EventClock,
    private readonly options: SimServerOptions,
  ) {}

  /** Reset the object now: calls in the next `downMs` fail as reset. */
  restart(downMs: number): void {
    this.downUntilMs = this.clock.nowMs() + downMs;
    this.freeAtMs = this.clock.nowMs();
  }

  /**
   * One call over a link with this one-way delay each way (and its own losses, if it has them; else the server's): it reaches the server, waits its turn, costs the server
   * its time (by `bytesOf()`, measured when it is served), runs `work`, and its answer travels back.
   */
  serve<T>(oneWayMs: Link, bytesOf: () => number, work: () => T | Promise<T>): Promise<T> {
    const { clock, options } = this;
    const lose = oneWayMs.lost ?? options.lose;
    const lost = () => lose?.() === true;
    return new Promise<T>((resolve, reject) => {
      // A lost call never reaches the object, a lost answer never reaches the caller: neither settles.
      if (lost()) return;
      const back = (settle: () => void) => {
        if (!lost()) clock.after(oneWayMs(), settle);
      };
      clock.after(oneWayMs(), () => {
        const now = clock.nowMs();
        const fail = (error: Error) => back(() => reject(error));
        if (now < this.downUntilMs) {
          this.counters.resets++;
          fail(Object.assign(new Error("Durable Object reset"), { durableObjectReset: true }));
          return;
        }
        const backlog = Math.max(0, this.freeAtMs - now) / options.serviceMs;
        if (backlog >= options.maxBacklog) {
          this.counters.overloaded++;
          fail(Object.assign(new Error("Durable Object is overloaded"), { overloaded: true }));
          return;
        }
        this.counters.calls++;
        this.freeAtMs = Math.max(this.freeAtMs, now) + options.serviceMs;
        // Applied at a whole ms (the object's clock, as `Date.now()`), however fractional the service time.
        clock.after(Math.ceil(this.freeAtMs) - now, () => {
          const at = clock.nowMs();
          this.appliedAtMs.push(at);
          let out: T | Promise<T>;
          try {
            out = work();
          } catch (error) {
            fail(error as Error);
            return;
          }
          // What it carried and wrote costs server time too (charged after, as the write follows the work).
          const bytes = bytesOf();
          this.counters.bytes += bytes;
          this.freeAtMs = Math.max(this.freeAtMs, at) + ((options.perKbMs ?? 0) * bytes) / 1024;
          Promise.resolve(out).then(
            (value) => back(() => resolve(value)),
            (error: Error) => fail(error),
          );
        });
      });
    });
  }

  /** The most calls served in any one second from `fromMs` (whole seconds from it). */
  busiestSecond(fromMs: number): number {
    const seconds = new Map<number, number>();
    for (const at of this.appliedAtMs) {
      const s = Math.floor((at - fromMs) / 1000);
      seconds.set(s, (seconds.get(s) ?? 0) + 1);
    }
    return Math.max(0, ...seconds.values());
  }

  /** Calls served in the second starting at `fromMs`. */
  callsInSecond(fromMs: number): number {
    return this.appliedAtMs.filter((at) => at >= fromMs && at < fromMs + 1000).length;
  }
}
