/**
 * A simulated delegate (the delegate tier's Durable Object, src/object/delegate.ts `SluiceDelegate`), for
 * bench/cluster.ts: the same steps as that shell, over the real pure delegate (src/protocol/delegate.ts) and the
 * simulated key's object (object.ts), on one server's capacity (server.ts). Per isolate batch: renew first when the
 * share needs it (`delegateNeed`, at most twice), pass the batch through to the key's object without a share, else
 * decide it from the share (`delegateCall`), renewing in the background in the last quarter of a term (`renewDue`);
 * at a window share's end, an alarm gives its unused units back. Its record is durable (`restart()` keeps it and
 * loses only the renewal in flight), as the shell writes it on every change.
 *
 * Simulated here: the Durable Object's storage, RPC and alarm. What it decides is the real code's.
 */

import {
  adoptGrant,
  type DelegateRecord,
  delegateCall,
  delegateNeed,
  NEW_DELEGATE,
  renewDue,
  shareAsk,
} from "../protocol/delegate.ts";
import type { ObjectTransport } from "../protocol/object_call.ts";
import type { CallInput, CallResult, LimiterRule } from "../protocol/store.ts";
import type { EventClock } from "./event_clock.ts";
import type { ShareTransport } from "./object.ts";
import { SimServer, type SimServerOptions } from "./server.ts";

export class SimDelegate {
  readonly server: SimServer;
  /** The durable record (written on every change). */
  private record: DelegateRecord = NEW_DELEGATE;
  /** The renewal in flight (memory: lost on a restart). */
  private renewing: Promise<void> | null = null;
  /** Restarts so far: a renewal answered after one went to an instance that is gone. */
  private life = 0;
  private ids = 0;
  /** Share asks that failed (batches then pass through to the key's object). */
  renewFailures = 0;

  constructor(
    private readonly clock: EventClock,
    options: SimServerOptions,
    /** This delegate's holder id: `${region}.0`. */
    private readonly holder: string,
    /** Its links to the key's object: batches passed through, and share asks. */
    private readonly key: { readonly calls: ObjectTransport; readonly shares: ShareTransport; readonly name: string },
  ) {
    this.server = new SimServer(clock, options);
  }

  /** A restart (a deploy, `ctx.abort()`): the record stays, the renewal in flight is forgotten. */
  restart(downMs: number): void {
    this.server.restart(downMs);
    this.renewing = null;
    this.life++;
  }

  /** A transport from one isolate of this delegate's region, with this one-way delay each way. */
  transportFrom(oneWayMs: () => number): ObjectTransport {
    const bytes = (input: unknown) => () => JSON.stringify(input).length + JSON.stringify(this.record).length;
    return {
      call: (_name, input) => this.server.serve(oneWayMs, bytes(input), () => this.check(input)),
      refund: async (_name, input) => {
        const call: CallInput = {
          rule: input.rule,
          id: `${this.holder}-r${this.ids++}`,
          costs: [],
          giveBack: [{ units: input.cost, atMs: input.admittedAtMs }],
        };
        const result = await this.server.serve(oneWayMs, bytes(call), () => this.check(call));
        return result.refunded ?? null;
      },
    };
  }

  private async check(call: CallInput): Promise<CallResult> {
    const cost = call.costs.reduce((a, b) => a + b, 0);
    for (let i = 0; i < 2 && delegateNeed(this.record, call.rule, call.costs, this.clock.nowMs()) === "renew"; i++) {
      await this.renew(call.rule, false, cost);
    }
    const record = this.record;
    if (record.share === null || delegateNeed(record, call.rule, call.costs, this.clock.nowMs()) === "renew") {
      const result = await this.key.calls.call(this.key.name, call);
      return { ...result, hot: result.hot === true };
    }
    if (renewDue(record, this.clock.nowMs()) && this.renewing === null) void this.renew(call.rule);
    const out = delegateCall(record, call, this.clock.nowMs());
    this.record = out.record;
    return out.result;
  }

  private renew(rule: LimiterRule, release = false, pendingCost = 0): Promise<void> {
    if (this.renewing !== null) return this.renewing;
    const life = this.life;
    this.renewing = (async () => {
      const sentAtMs = this.clock.nowMs();
      const id = `${this.holder}-s${this.ids++}`;
      const asked = shareAsk(this.record, this.holder, rule, id, sentAtMs, release, pendingCost);
      this.record = asked.record;
      try {
        const grant = await this.key.shares.share(asked.ask);
        if (this.life !== life) return; // restarted meanwhile: the answer went to an instance that is gone
        this.record = adoptGrant(this.record, asked.ask, grant, sentAtMs, this.clock.nowMs());
        const share = this.record.share;
        if (share !== null && share.kind === "window") this.alarmAt(share.endsAtMs, rule);
      } catch {
        this.renewFailures++;
        if (this.life === life) this.record = { ...this.record, share: null };
      } finally {
        if (this.life === life) this.renewing = null;
      }
    })();
    return this.renewing;
  }

  /** The shell's alarm at a window share's end: give its unused units back if no call did. */
  private alarmAt(atMs: number, rule: LimiterRule): void {
    this.clock.after(Math.max(0, atMs - this.clock.nowMs()), () => {
      const share = this.record.share;
      if (share === null || share.kind !== "window" || share.unitsLeft === 0) return;
      if (this.clock.nowMs() < share.endsAtMs) return;
      void this.renew(rule, true);
    });
  }
}
