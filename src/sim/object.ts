/**
 * A simulated key's Durable Object and network, for bench/cluster.ts and tests: the real record operations (the
 * key's object's call, by default share.ts `keyCall`; store.ts `refundRecord`; share_grant.ts `shareRecord` for a
 * delegate's share) behind one-way delays, on one server's capacity (server.ts): every call is charged by its size
 * and the record it writes, refunds and share renewals included. `restart()` resets the object: its memory is lost
 * (the stored record, with its call slots, stays, as limiter.ts reloads it) and calls in the next `downMs` fail.
 */

import { storedRecord } from "../protocol/call_slots.ts";
import type { ObjectTransport } from "../protocol/object_call.ts";
import { keyCall, type ShareAsk, type ShareGrant } from "../protocol/share.ts";
import { shareRecord } from "../protocol/share_grant.ts";
import {
  type CallInput,
  CallPace,
  type CallResult,
  type LimiterRecord,
  type RefundInput,
  type RefundResult,
  refundRecord,
} from "../protocol/store.ts";
import type { EventClock } from "./event_clock.ts";
import type { Link } from "./network.ts";
import { SimServer, type SimServerCounters, type SimServerOptions } from "./server.ts";

export interface SimObjectOptions extends SimServerOptions {
  /**
   * The record operation a call runs (default share.ts `keyCall`, as limiter.ts): a test swaps in a deliberately
   * wrong copy to show that its property catches the fault (test/unit/share_bound.props.test.ts).
   */
  readonly apply?: typeof keyCall;
}

export interface SimObjectCounters extends SimServerCounters {
  refunds: number;
  /** Delegates' share asks served. */
  shares: number;
}

/** How a delegate reaches the key's object for its share (limiter.ts `share`). */
export interface ShareTransport {
  share(ask: ShareAsk): Promise<ShareGrant>;
}

export class SimObject {
  record: LimiterRecord | null = null;
  /** Called at every write of the record (the rate ledger): before, after, the admissions and lease units charged. */
  onWrite: (before: LimiterRecord | null, after: LimiterRecord | null, charged: number, lent: number) => void =
    () => {};
  readonly server: SimServer;
  private refunds = 0;
  private shares = 0;
  /** Its calls' pace, refusals included (store.ts `CallPace`, as limiter.ts keeps it): lost at a restart. */
  private pace = new CallPace();

  constructor(
    private readonly clock: EventClock,
    private readonly options: SimObjectOptions,
    /** Called with every applied call's result, in the order the object applied them. */
    private readonly onApplied: (input: CallInput, result: CallResult) => void = () => {},
  ) {
    this.server = new SimServer(clock, options);
  }

  get counters(): SimObjectCounters {
    return { ...this.server.counters, refunds: this.refunds, shares: this.shares };
  }

  /** When each applied call (of any kind) was applied, ms. */
  get appliedAtMs(): readonly number[] {
    return this.server.appliedAtMs;
  }

  restart(downMs: number): void {
    this.pace = new CallPace();
    this.server.restart(downMs);
  }

  private write(record: LimiterRecord | null, charged: number, lent: number): void {
    const before = this.record;
    this.record = record;
    this.onWrite(before, record, charged, lent);
  }

  /** Bytes a call costs: what it carries, and the record it leaves stored. */
  private bytesWith(input: unknown): () => number {
    return () =>
      JSON.stringify(input).length + (this.record === null ? 0 : JSON.stringify(storedRecord(this.record)).length);
  }

  /** A transport from one isolate (or a delegate passing a batch through), with this one-way delay each way. */
  transportFrom(oneWayMs: Link): ObjectTransport {
    return {
      call: (_name, input: CallInput) =>
        this.server.serve(oneWayMs, this.bytesWith(input), () => {
          const apply = this.options.apply ?? keyCall;
          const nowMs = this.clock.nowMs();
          const { result, record } = apply(this.record, input, nowMs, this.pace.note(nowMs));
          const fresh = !result.replayed;
          const charged = result.results.reduce(
            (n, r, i) => n + (fresh && r.ok && r.decision.allowed ? input.costs[i]! : 0),
            0,
          );
          this.write(record, charged, fresh ? (result.lease?.units ?? 0) : 0);
          this.onApplied(input, result);
          return result;
        }),
      refund: (_name, input: RefundInput) =>
        this.server.serve(oneWayMs, this.bytesWith(input), (): RefundResult => {
          this.refunds++;
          const { result, record } = refundRecord(this.record, input, this.clock.nowMs());
          this.write(record, 0, 0);
          return result;
        }),
    };
  }

  /** A delegate's link to this object for its share asks. */
  shareFrom(oneWayMs: Link): ShareTransport {
    return {
      share: (ask) =>
        this.server.serve(oneWayMs, this.bytesWith(ask), () => {
          this.shares++;
          const { grant, record } = shareRecord(this.record, ask, this.clock.nowMs());
          this.write(record, 0, 0);
          return grant;
        }),
    };
  }
}
