/**
 * A simulated Durable Object and network, for bench/cluster.ts and tests: the real record operations (store.ts
 * `callRecord`, `refundRecord`) behind one-way delays, with one object's capacity modelled as a single server that
 * takes `serviceMs` per call (plus `perKbMs` per KB of the call and of the record it writes, when given: a large record
 * costs the object on every call) and rejects a call with `overloaded` when its backlog is already `maxBacklog` calls
 * long (Cloudflare documents a soft limit of about 1,000 requests/s per object). `restart()` models the object being
 * reset: its memory is lost (the stored record stays), and calls in the next `downMs` fail with `durableObjectReset`.
 */

import { storedRecord } from "../protocol/call_slots.ts";
import type { ObjectTransport } from "../protocol/object_call.ts";
import {
  type CallInput,
  type CallResult,
  callRecord,
  type LimiterRecord,
  type RefundInput,
  type RefundResult,
  refundRecord,
} from "../protocol/store.ts";
import type { EventClock } from "./event_clock.ts";

export interface SimObjectOptions {
  /** Time the object spends on one call, ms (1 => at most 1,000 calls/s). */
  readonly serviceMs: number;
  /** Calls waiting beyond which a new call is rejected as overloaded. */
  readonly maxBacklog: number;
  /** Time per KB of the call's input and of the record it stores, ms (default 0). */
  readonly perKbMs?: number;
  /**
   * The record operation a call runs (default store.ts `callRecord`): a test swaps in a deliberately wrong copy to
   * show that its property catches the fault (test/unit/share_bound.props.test.ts).
   */
  readonly apply?: typeof callRecord;
}

export interface SimObjectCounters {
  calls: number;
  overloaded: number;
  refunds: number;
  /** Calls refused while the object was restarting. */
  resets: number;
  /** Bytes of call inputs and stored records the object handled. */
  bytes: number;
}

export class SimObject {
  record: LimiterRecord | null = null;
  readonly counters: SimObjectCounters = { calls: 0, overloaded: 0, refunds: 0, resets: 0, bytes: 0 };
  /** When the server is next free, ms. */
  private freeAtMs = 0;
  /** Until when calls fail as reset (a restart), ms. */
  private downUntilMs = 0;
  /** When each applied call was applied, ms (for calls per second). */
  readonly appliedAtMs: number[] = [];

  /** Reset the object now: calls in the next `downMs` fail as reset; the stored record (without memory) stays. */
  restart(downMs: number): void {
    this.downUntilMs = this.clock.nowMs() + downMs;
    this.freeAtMs = this.clock.nowMs();
    // What survives: the record as stored, with the calls stored beside it (call_slots.ts), as limiter.ts reloads it.
  }

  constructor(
    private readonly clock: EventClock,
    private readonly options: SimObjectOptions,
    /** Called with every applied call's result, in the order the object applied them. */
    private readonly onApplied: (input: CallInput, result: CallResult) => void = () => {},
  ) {}

  /** A transport from one isolate, with this one-way delay each way. */
  transportFrom(oneWayMs: () => number): ObjectTransport {
    return {
      call: (_name, input) =>
        new Promise<CallResult>((resolve, reject) => {
          this.clock.after(oneWayMs(), () => {
            const now = this.clock.nowMs();
            if (now < this.downUntilMs) {
              this.counters.resets++;
              const error = Object.assign(new Error("Durable Object reset"), { durableObjectReset: true });
              this.clock.after(oneWayMs(), () => reject(error));
              return;
            }
            const backlog = Math.max(0, this.freeAtMs - now) / this.options.serviceMs;
            if (backlog >= this.options.maxBacklog) {
              this.counters.overloaded++;
              const error = Object.assign(new Error("Durable Object is overloaded"), { overloaded: true });
              this.clock.after(oneWayMs(), () => reject(error));
              return;
            }
            this.counters.calls++;
            const bytes =
              JSON.stringify(input).length +
              (this.record === null ? 0 : JSON.stringify(storedRecord(this.record)).length);
            this.counters.bytes += bytes;
            const costMs = this.options.serviceMs + ((this.options.perKbMs ?? 0) * bytes) / 1024;
            this.freeAtMs = Math.max(this.freeAtMs, now) + costMs;
            // Applied at a whole ms (the object's clock, as `Date.now()`), however fractional the service time.
            this.clock.after(Math.ceil(this.freeAtMs) - now, () => {
              const apply = this.options.apply ?? callRecord;
              const { result, record } = apply(this.record, input, this.clock.nowMs());
              this.record = record;
              this.appliedAtMs.push(this.clock.nowMs());
              this.onApplied(input, result);
              this.clock.after(oneWayMs(), () => resolve(result));
            });
          });
        }),
      refund: (_name, input: RefundInput) =>
        new Promise<RefundResult>((resolve) => {
          this.clock.after(oneWayMs(), () => {
            this.counters.refunds++;
            const { result, record } = refundRecord(this.record, input, this.clock.nowMs());
            this.record = record;
            this.clock.after(oneWayMs(), () => resolve(result));
          });
        }),
    };
  }
}
