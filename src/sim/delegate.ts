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
import { releaseDue } from "../protocol/delegate_record.ts";
import { DelegateRun, type DelegateWho } from "../protocol/delegate_run.ts";
import type { ObjectTransport } from "../protocol/object_call.ts";
import type { CallInput } from "../protocol/store.ts";
import type { EventClock } from "./event_clock.ts";
import { shareTokens } from "./ledger_tokens.ts";
import type { Link } from "./network.ts";
import type { ShareTransport } from "./object.ts";
import { SimServer, type SimServerOptions } from "./server.ts";

/** What a rate ledger (rate_ledger.ts) learns from a delegate: nothing here changes what it decides. */
export interface DelegateWatch {
  /** Results this delegate decided itself (not passed through): from a live share or without one. */
  decided(results: readonly object[], withShare: boolean): void;
  /** Units of sub-leases a batch gave back (not admissions it gives back: those go on to the key's object). */
  gaveBack(units: number): void;
  /**
   * A batch's decisions out of a rate share, as saved: the cost admitted, units lent, and tokens `restored` to the
   * share (units given back its reservations took, less what settling them lost at a full bucket).
   */
  spent(admitted: number, lent: number, restored: number): void;
  /**
   * A rate share adopted, cut or lost: the tokens its bucket held that the new bucket does not hold (`dropped`), or
   * holds beyond them (`made`: a grant's tokens moved to it, an ended share's bucket refilled until it was renewed).
   */
  changed(dropped: number, made: number): void;
}

export class SimDelegate {
  readonly server: SimServer;
  /** The durable record. */
  private record: DelegateRecord = NEW_DELEGATE;
  private run: DelegateRun;
  /** Restarts so far: an instance that is gone writes nothing. */
  private life = 0;
  private ids = 0;
  /** The costs of the batches being decided, by call id (the rate ledger). */
  private readonly costs = new Map<string, readonly number[]>();
  /** Share asks that failed (batches then pass through to the key's object). */
  renewFailures = 0;

  constructor(
    private readonly clock: EventClock,
    options: SimServerOptions,
    /** This delegate's holder id: `${region}.${shard}`. */
    readonly holder: string,
    /** Its links to the key's object: batches passed through, and share asks. */
    private readonly key: { readonly calls: ObjectTransport; readonly shares: ShareTransport; readonly name: string },
    /** When each result was decided: set for the ones this delegate decides (a window share's carry its grant's time). */
    private readonly decidedAt: WeakMap<object, number> = new WeakMap(),
    private readonly watch: DelegateWatch | null = null,
  ) {
    this.server = new SimServer(clock, options);
    this.run = this.instance();
  }

  /** The durable record now (for the rate ledger). */
  get state(): DelegateRecord {
    return this.record;
  }

  /** A rate share's tokens moved by a save, told to the watch: a share adopted, cut or lost, or a batch's decisions. */
  private watchSave(before: DelegateRecord, after: DelegateRecord): void {
    const was = before.share;
    const now = after.share;
    if (this.watch === null || was === now || (now ?? was)?.kind !== "rate") return;
    const t = this.clock.nowMs();
    const adopted = now !== null && now.askId !== was?.askId;
    if (adopted || now === null || was === null || now.parts !== was.parts) {
      // An ended share's bucket as it was at its end: what the new one holds beyond it is made (its refill after the
      // end for parts still promised to it, delegate.ts `adoptGrant`).
      const wasAt = was !== null && was.kind === "rate" ? Math.min(t, was.endsAtMs) : t;
      const d = shareTokens(was, wasAt) - shareTokens(now, t);
      this.watch.changed(Math.max(0, d), Math.max(0, -d));
      return;
    }
    // The same share: units given back taken (`takeBack`), or a batch decided (`delegateCall`, the last call).
    const call = after.calls === before.calls ? undefined : after.calls.at(-1);
    const costs = (call === undefined ? undefined : this.costs.get(call.id)) ?? [];
    const admitted = costs.reduce((n, c, i) => n + (call?.verdicts[i] === "1" ? c : 0), 0);
    const lent = call?.leaseUnits ?? 0;
    this.watch.spent(admitted, lent, shareTokens(now, t) - shareTokens(was, t) + admitted + lent);
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
        if (!alive()) return;
        this.watchSave(this.record, record);
        this.record = record;
      },
      call: (_object, input) => this.key.calls.call(this.key.name, input),
      share: (_object, ask) => this.key.shares.share(ask),
      adopted: (record, who) => {
        const share = record.share;
        if (alive() && share !== null) this.alarmAt(share.endsAtMs, who);
      },
      failed: () => {
        this.renewFailures++;
      },
      sleep: (ms) => this.clock.sleep(ms),
      passFirst: true,
    });
  }

  /** A transport from one isolate of this delegate's region, with this one-way delay each way. */
  transportFrom(oneWayMs: Link): ObjectTransport {
    const bytes = (input: unknown) => () => JSON.stringify(input).length + JSON.stringify(this.record).length;
    const who = (call: CallInput): DelegateWho => ({ object: this.key.name, holder: this.holder, rule: call.rule });
    // A batch is answered only if the instance that took it is still alive: a restart loses its answers.
    const check = async (call: CallInput) => {
      const life = this.life;
      const back = (call.giveBack ?? []).reduce((n, b) => n + (b.admitted === true ? 0 : b.units), 0);
      if (back > 0) this.watch?.gaveBack(back);
      this.costs.set(call.id, call.costs);
      const result = await this.run.check(who(call), call).finally(() => this.costs.delete(call.id));
      if (this.life !== life) throw Object.assign(new Error("Durable Object reset"), { durableObjectReset: true });
      const mine = result.results.filter((r) => !this.decidedAt.has(r));
      for (const r of mine) this.decidedAt.set(r, this.clock.nowMs());
      const share = this.record.share;
      if (mine.length > 0) this.watch?.decided(mine, share !== null && this.clock.nowMs() < share.endsAtMs);
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

  /** The shell's alarm at a share's end: give back a window share's unused units, and units kept for an ask. */
  private alarmAt(atMs: number, who: DelegateWho): void {
    this.clock.after(Math.max(0, atMs - this.clock.nowMs()), () => {
      if (releaseDue(this.record, this.clock.nowMs())) void this.run.renew(who, true);
    });
  }
}
