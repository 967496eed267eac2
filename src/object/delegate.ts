/**
 * `SluiceDelegate`: a delegate, one Durable Object per (rule, key, region, shard) (names.ts `delegateNameOf`), a thin
 * shell around src/protocol/delegate_run.ts. It writes its record on every change before answering (the output gate
 * holds the answer until the write is durable), so its share survives a restart. RPC `check`: an isolate's batch.
 * Its alarm gives a window share's unused units back at the term's end, and deletes an idle delegate's record.
 */
import { DurableObject } from "cloudflare:workers";
import { logEvent } from "../isolate/metrics.ts";
import { type Clock, type Sleep, systemClock, systemSleep } from "../isolate/time.ts";
import { type DelegateRecord, delegateIdle, NEW_DELEGATE } from "../protocol/delegate.ts";
import { releaseDue } from "../protocol/delegate_record.ts";
import { DelegateRun, type DelegateWho } from "../protocol/delegate_run.ts";
import type { CallInput, CallResult } from "../protocol/store.ts";
import { DELEGATE_IDLE_MS } from "../protocol/tunables.ts";
import type { SluiceLimiter } from "./limiter.ts";

/** An isolate's batch for a delegate. */
export interface DelegateCallInput extends CallInput {
  /** The key's object's name (names.ts `objectNameOf`). */
  readonly object: string;
  /** This delegate's region and shard (names.ts `delegateIdOf`): `weur.0`. */
  readonly holder: string;
}

/** Storage keys: the record, and whom it works for (the alarm has no call to read it from). */
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
      passFirst: true,
    });
  }

  check(input: DelegateCallInput): Promise<CallResult> {
    const { object, holder, ...call } = input;
    return this.run.check({ object, holder, rule: call.rule }, call);
  }

  /** Forget the share and every call (an admin reset of the key); `true` if there was a share or calls. */
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
