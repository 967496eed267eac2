/**
 * `SluiceDelegate`: the delegate tier's Durable Object, one per (rule, key, region), named by names.ts
 * `delegateNameOf` (hashed key only) and created with the region's `locationHint`. A thin shell around the delegate's
 * steps (src/protocol/delegate_run.ts) and pure decisions (src/protocol/delegate.ts): it keeps its record in memory
 * and writes it to its SQLite storage on every change, synchronously, before answering (the runtime's output gate
 * holds the answer until the write is durable), so the share it holds survives a restart.
 *
 * RPC `check(input)`: an isolate's batch (the same `CallInput` the key's object takes, plus the key's object's name
 * and this delegate's holder id), decided from the share (with a sub-lease for the isolate when it asks: sublease.ts),
 * renewed with the key's object (`SluiceLimiter.share`) when needed, or passed through to the key's object without a
 * share (`hot: false` unless that object says hot).
 *
 * An alarm at its share's end gives a window share's unused units back (nothing else would, if no isolate calls), and
 * an idle delegate deletes its record later.
 */
import { DurableObject } from "cloudflare:workers";
import { logEvent } from "../isolate/metrics.ts";
import { type Clock, type Sleep, systemClock, systemSleep } from "../isolate/time.ts";
import { type DelegateRecord, delegateIdle, NEW_DELEGATE } from "../protocol/delegate.ts";
import { releaseDue } from "../protocol/delegate_ahead.ts";
import { DelegateRun, type DelegateWho } from "../protocol/delegate_run.ts";
import type { CallInput, CallResult } from "../protocol/store.ts";
import { DELEGATE_IDLE_MS } from "../protocol/tunables.ts";
import type { SluiceLimiter } from "./limiter.ts";

/** An isolate's batch for a delegate. */
export interface DelegateCallInput extends CallInput {
  /** The key's object's name (names.ts `objectNameOf`): whom to renew with and pass batches through to. */
  readonly object: string;
  /** This delegate's holder id (names.ts `holderOf`): `weur.0`. */
  readonly holder: string;
}

/** Where the delegate keeps its record, and whom it works for (for the alarm, which has no call to read it from). */
const RECORD_KEY = "delegate";
const WHO_KEY = "who";

type DelegateEnv = { readonly LIMITER: DurableObjectNamespace<SluiceLimiter> };

export class SluiceDelegate extends DurableObject<DelegateEnv> {
  private record: DelegateRecord | undefined;
  private readonly run: DelegateRun;

  constructor(
    ctx: DurableObjectState,
    env: DelegateEnv,
    private readonly clock: Clock = systemClock,
    sleep: Sleep = systemSleep,
  ) {
    super(ctx, env);
    this.run = new DelegateRun({
      clock,
      newId: () => crypto.randomUUID(),
      load: () => this.load(),
      save: (record) => this.save(record),
      call: async (object, input) => (await this.keyObject(object).check(input)) as CallResult,
      share: (object, ask) => this.keyObject(object).share(ask),
      adopted: async (record, who) => {
        this.ctx.storage.kv.put(WHO_KEY, who);
        if (record.share !== null) await this.ctx.storage.setAlarm(record.share.endsAtMs);
      },
      failed: (error) => logEvent("warn", { event: "delegate_renew_failed", error }),
      sleep,
    });
  }

  check(input: DelegateCallInput): Promise<CallResult> {
    const { object, holder, ...call } = input;
    return this.run.check({ object, holder, rule: call.rule }, call);
  }

  /**
   * Forget this delegate's share and everything it keeps (an admin reset of its key, which forgot the charge): its
   * next batch starts fresh, asking the key's object for a new share. `true` if there was a share or calls.
   */
  async reset(): Promise<boolean> {
    const record = this.load();
    const existed = record.share !== null || record.calls.length > 0;
    this.record = NEW_DELEGATE;
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
    return existed;
  }

  override async alarm(): Promise<void> {
    const record = this.load();
    const who = this.ctx.storage.kv.get<DelegateWho>(WHO_KEY);
    const now = this.clock();
    if (who !== undefined && releaseDue(record, now)) await this.run.renew(who, true);
    const after = this.load();
    const lastCallMs = after.calls.at(-1)?.atMs ?? 0;
    if (delegateIdle(after, now) && now - lastCallMs >= DELEGATE_IDLE_MS) {
      this.record = NEW_DELEGATE;
      await this.ctx.storage.deleteAll();
      return;
    }
    const endsAtMs = after.share?.endsAtMs ?? now;
    await this.ctx.storage.setAlarm(Math.max(now + 1, endsAtMs > now ? endsAtMs : lastCallMs + DELEGATE_IDLE_MS));
  }

  private keyObject(name: string): DurableObjectStub<SluiceLimiter> {
    return this.env.LIMITER.get(this.env.LIMITER.idFromName(name));
  }

  private load(): DelegateRecord {
    if (this.record === undefined) this.record = this.ctx.storage.kv.get<DelegateRecord>(RECORD_KEY) ?? NEW_DELEGATE;
    return this.record;
  }

  private save(record: DelegateRecord): void {
    this.record = record;
    this.ctx.storage.kv.put(RECORD_KEY, record);
  }
}
