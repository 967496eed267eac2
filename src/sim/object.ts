/**
 * A simulated Durable Object and network, for bench/cluster.ts and tests: the real record operations (store.ts
 * `callRecord`, `refundRecord`) behind one-way delays, with one object's capacity modelled as a single server that
 * takes `serviceMs` per call and rejects a call with `overloaded` when its backlog is already `maxBacklog` calls long
 * (Cloudflare documents a soft limit of about 1,000 requests/s per object).
 */
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
}

export interface SimObjectCounters {
  calls: number;
  overloaded: number;
  refunds: number;
}

export class SimObject {
  record: LimiterRecord | null = null;
  readonly counters: SimObjectCounters = { calls: 0, overloaded: 0, refunds: 0 };
  /** When the server is next free, ms. */
  private freeAtMs = 0;

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
            const backlog = Math.max(0, this.freeAtMs - now) / this.options.serviceMs;
            if (backlog >= this.options.maxBacklog) {
              this.counters.overloaded++;
              const error = Object.assign(new Error("Durable Object is overloaded"), { overloaded: true });
              this.clock.after(oneWayMs(), () => reject(error));
              return;
            }
            this.counters.calls++;
            this.freeAtMs = Math.max(this.freeAtMs, now) + this.options.serviceMs;
            this.clock.after(this.freeAtMs - now, () => {
              const { result, record } = callRecord(this.record, input, this.clock.nowMs());
              this.record = record;
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
