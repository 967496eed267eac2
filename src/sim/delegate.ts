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
import { type CallInput, type LeaseReturn, peekState } from "../protocol/store.ts";
import { delegateSlice, returnRoom } from "../protocol/sublease.ts";
import type { EventClock } from "./event_clock.ts";
import type { Link } from "./network.ts";
import type { ShareTransport } from "./object.ts";
import { SimServer, type SimServerOptions } from "./server.ts";

/** What a rate ledger (rate_ledger.ts) learns from a delegate: nothing here changes what it decides. */
export interface DelegateWatch {
  /** Results this delegate decided itself (not passed through): from a live share or without one; tokens lent. */
  decided(results: readonly object[], withShare: boolean, lent: number): void;
  /** Units a batch gave back, and the room its live rate slice had for them (`null`: no live slice). */
  gaveBack(units: number, room: number | null): void;
  /**
   * A rate share replaced, cut or lost: the tokens its bucket held (and a grant moved to it) that the new bucket does
   * not hold (`dropped`), or holds beyond them (`made`: an ended share's bucket refilled until it was renewed).
   */
  changed(dropped: number, made: number): void;
}

/** Tokens in a rate share's bucket now (0: none). */
function tokensOf(share: DelegateRecord["share"], nowMs: number): number {
  if (share === null || share.kind !== "rate" || share.state === null) return 0;
  const slice = delegateSlice(share.rule.params, share.parts);
  return slice === null ? 0 : peekState(slice, share.state, nowMs).remaining;
}

export class SimDelegate {
  readonly server: SimServer;
  /** The durable record. */
  private record: DelegateRecord = NEW_DELEGATE;
  private run: DelegateRun;
  /** Restarts so far: an instance that is gone writes nothing. */
  private life = 0;
  private ids = 0;
  /** Tokens the last grant moved to this delegate, not yet seen adopted (the rate ledger). */
  private grantTokens = 0;
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

  /** A rate share replaced (a grant adopted), cut, or lost: its tokens told to the watch. */
  private watchChange(before: DelegateRecord, after: DelegateRecord): void {
    const was = before.share;
    const now = after.share;
    if (this.watch === null || was === now) return;
    const adopted = now !== null && now.askId !== was?.askId;
    if (!adopted && now !== null && was !== null && now.parts === was.parts) return;
    const t = this.clock.nowMs();
    // An ended share's bucket as it was at its end: what the new one holds beyond it is made (its refill after the end
    // for parts still promised to it, delegate.ts `adoptGrant`).
    const wasAt = was !== null && was.kind === "rate" ? Math.min(t, was.endsAtMs) : t;
    const d = tokensOf(was, wasAt) + (adopted ? this.grantTokens : 0) - tokensOf(now, t);
    if (adopted) this.grantTokens = 0;
    this.watch.changed(Math.max(0, d), Math.max(0, -d));
  }

  /** Room for units given back in the live rate slice now: those its reservations take (`null`: no live slice). */
  private room(giveBack: readonly LeaseReturn[]): number | null {
    const share = this.record.share;
    const now = this.clock.nowMs();
    if (share === null || share.kind !== "rate" || share.state === null || now >= share.endsAtMs) return null;
    return returnRoom(share, giveBack, now);
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
        this.watchChange(this.record, record);
        this.record = record;
      },
      call: (_object, input) => this.key.calls.call(this.key.name, input),
      share: async (_object, ask) => {
        const grant = await this.key.shares.share(ask);
        this.grantTokens = grant.tokens ?? 0;
        return grant;
      },
      adopted: (record, who) => {
        const share = record.share;
        if (alive() && share !== null && share.kind === "window") this.alarmAt(share.endsAtMs, who);
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
      const back = (call.giveBack ?? []).reduce((n, b) => n + b.units, 0);
      if (back > 0) this.watch?.gaveBack(back, this.room(call.giveBack ?? []));
      const result = await this.run.check(who(call), call);
      if (this.life !== life) throw Object.assign(new Error("Durable Object reset"), { durableObjectReset: true });
      const mine = result.results.filter((r) => !this.decidedAt.has(r));
      for (const r of mine) this.decidedAt.set(r, this.clock.nowMs());
      const share = this.record.share;
      const live = share !== null && this.clock.nowMs() < share.endsAtMs;
      if (mine.length > 0 || result.lease !== null) {
        this.watch?.decided(mine, live, live && share.kind === "rate" ? (result.lease?.units ?? 0) : 0);
      }
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
      if (releaseDue(this.record, this.clock.nowMs())) void this.run.renew(who, true);
    });
  }
}
