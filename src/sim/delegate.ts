/**
 * A simulated delegate (the delegate tier's Durable Object, src/object/delegate.ts `SluiceDelegate`), for
 * bench/cluster.ts: the real delegate steps (src/protocol/delegate_run.ts `DelegateRun`, which SluiceDelegate runs too)
 * over the real pure delegate, with the simulated key's object (object.ts) as its ports and one server's capacity
 * (server.ts). Like the shell, it keeps its record durably (written on every change), and at a window share's end an
 * alarm gives its unused units back. `restart()` keeps the record and loses the instance: a renewal in flight is
 * answered to nobody.
 *
 * Simulated here: the Durable Object's storage, RPC and alarm. What it decides is the real code's.
 */
import { type DelegateRecord, NEW_DELEGATE } from "../protocol/delegate.ts";
import { DelegateRun, type DelegateWho } from "../protocol/delegate_run.ts";
import type { ObjectTransport } from "../protocol/object_call.ts";
import type { CallInput } from "../protocol/store.ts";
import type { EventClock } from "./event_clock.ts";
import type { ShareTransport } from "./object.ts";
import { SimServer, type SimServerOptions } from "./server.ts";

export class SimDelegate {
  readonly server: SimServer;
  /** The durable record. */
  private record: DelegateRecord = NEW_DELEGATE;
  private run: DelegateRun;
  /** Restarts so far: an instance that is gone writes nothing. */
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
    /** When each result was decided: set for the ones this delegate decides (a window share's carry its grant's time). */
    private readonly decidedAt: WeakMap<object, number> = new WeakMap(),
  ) {
    this.server = new SimServer(clock, options);
    this.run = this.instance();
  }

  /** A restart (a deploy, `ctx.abort()`): the record stays, the instance and its renewal in flight are gone. */
  restart(downMs: number): void {
    this.server.restart(downMs);
    this.life++;
    this.run = this.instance();
  }

  private instance(): DelegateRun {
    const life = this.life;
    const alive = () => this.life === life;
    return new DelegateRun({
      clock: () => this.clock.nowMs(),
      newId: () => `${this.holder}-${this.ids++}`,
      load: () => this.record,
      save: (record) => {
        if (alive()) this.record = record;
      },
      call: (_object, input) => this.key.calls.call(this.key.name, input),
      share: (_object, ask) => this.key.shares.share(ask),
      adopted: (record, who) => {
        const share = record.share;
        if (alive() && share !== null && share.kind === "window") this.alarmAt(share.endsAtMs, who);
      },
      failed: () => {
        this.renewFailures++;
      },
    });
  }

  /** A transport from one isolate of this delegate's region, with this one-way delay each way. */
  transportFrom(oneWayMs: () => number): ObjectTransport {
    const bytes = (input: unknown) => () => JSON.stringify(input).length + JSON.stringify(this.record).length;
    const who = (call: CallInput): DelegateWho => ({ object: this.key.name, holder: this.holder, rule: call.rule });
    // A batch is answered only if the instance that took it is still alive: a restart loses its answers.
    const check = async (call: CallInput) => {
      const life = this.life;
      const result = await this.run.check(who(call), call);
      if (this.life !== life) throw Object.assign(new Error("Durable Object reset"), { durableObjectReset: true });
      for (const r of result.results) if (!this.decidedAt.has(r)) this.decidedAt.set(r, this.clock.nowMs());
      return result;
    };
    return {
      call: (_name, input) => this.server.serve(oneWayMs, bytes(input), () => check(input)),
      refund: async (_name, input) => {
        const call: CallInput = {
          rule: input.rule,
          id: `${this.holder}-r${this.ids++}`,
          costs: [],
          giveBack: [{ units: input.cost, atMs: input.admittedAtMs }],
        };
        const result = await this.server.serve(oneWayMs, bytes(call), () => check(call));
        return result.refunded ?? null;
      },
    };
  }

  /** The shell's alarm at a window share's end: give its unused units back if no call did. */
  private alarmAt(atMs: number, who: DelegateWho): void {
    this.clock.after(Math.max(0, atMs - this.clock.nowMs()), () => {
      const share = this.record.share;
      if (share === null || share.kind !== "window" || share.unitsLeft === 0) return;
      if (this.clock.nowMs() < share.endsAtMs) return;
      void this.run.renew(who, true);
    });
  }
}
