/**
 * `SluiceDelegate`: the delegate tier's Durable Object, one per (rule, key, region), named by names.ts
 * `delegateNameOf` (hashed key only) and created with the region's `locationHint`. A thin shell around the pure
 * delegate (src/protocol/delegate.ts): it keeps its record in memory and writes it to its SQLite storage on every
 * change, synchronously, before answering (the runtime's output gate holds the answer until the write is durable),
 * so the share it holds survives a restart.
 *
 * RPC `check(input)`: an isolate's batch (the same `CallInput` the key's object takes, plus the key's object's name
 * and this delegate's holder id). When its share has ended, is short, or an isolate brings a newer rules version, it
 * renews with the key's object first (`SluiceLimiter.share`); in the last quarter of a term it renews in the
 * background. Without a share (the key went cold, or the key's object could not be asked), it passes the batch
 * through to the key's object unchanged and answers what that says, `hot: false` unless the object says hot.
 *
 * An alarm at its share's end gives a window share's unused units back (nothing else would, if no isolate calls), and
 * an idle delegate deletes its record later.
 */
import { DurableObject } from "cloudflare:workers";
import { logEvent } from "../isolate/metrics.ts";
import { type Clock, systemClock } from "../isolate/time.ts";
import {
  adoptGrant,
  type DelegateRecord,
  delegateCall,
  delegateIdle,
  delegateNeed,
  NEW_DELEGATE,
  renewDue,
  shareAsk,
} from "../protocol/delegate.ts";
import { messageOf } from "../protocol/object_call.ts";
import type { CallInput, CallResult, LimiterRule } from "../protocol/store.ts";
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
/** How long an idle delegate keeps its record before deleting it, ms. */
export const DELEGATE_IDLE_MS = 60_000;

interface Who {
  readonly object: string;
  readonly holder: string;
  readonly rule: LimiterRule;
}

export class SluiceDelegate extends DurableObject<{ readonly LIMITER: DurableObjectNamespace<SluiceLimiter> }> {
  private record: DelegateRecord | undefined;
  /** The renewal in flight, if any (one at a time: the others wait for it). */
  private renewing: Promise<void> | null = null;

  constructor(
    ctx: DurableObjectState,
    env: { readonly LIMITER: DurableObjectNamespace<SluiceLimiter> },
    private readonly clock: Clock = systemClock,
  ) {
    super(ctx, env);
  }

  async check(input: DelegateCallInput): Promise<CallResult> {
    const { object, holder, ...call } = input;
    const who: Who = { object, holder, rule: call.rule };
    // At most twice: a renewal that another call started may have been for an older version or a smaller need.
    const cost = call.costs.reduce((a, b) => a + b, 0);
    for (let i = 0; i < 2 && delegateNeed(this.load(), call.rule, call.costs, this.clock()) === "renew"; i++) {
      await this.renew(who, false, cost);
    }
    const record = this.load();
    if (record.share === null || delegateNeed(record, call.rule, call.costs, this.clock()) === "renew") {
      return this.passThrough(object, call);
    }
    if (renewDue(record, this.clock()) && this.renewing === null) void this.renew(who);
    const out = delegateCall(record, call, this.clock());
    this.save(out.record);
    return out.result;
  }

  /** The batch decided by the key's object itself (no share here): cold unless the object says hot. */
  private async passThrough(object: string, call: CallInput): Promise<CallResult> {
    const result = (await this.keyObject(object).check(call)) as CallResult;
    return { ...result, hot: result.hot === true };
  }

  /** Renew the share with the key's object (or let it go: `release`). One renewal at a time. */
  private renew(who: Who, release = false, pendingCost = 0): Promise<void> {
    if (this.renewing !== null) return this.renewing;
    this.renewing = (async () => {
      const sentAtMs = this.clock();
      const id = crypto.randomUUID();
      const asked = shareAsk(this.load(), who.holder, who.rule, id, sentAtMs, release, pendingCost);
      // Units given back are no longer this delegate's, whatever the answer: a lost answer leaves the key short.
      this.save(asked.record);
      this.ctx.storage.kv.put(WHO_KEY, who);
      try {
        const grant = await this.keyObject(who.object).share(asked.ask);
        const record = adoptGrant(this.load(), asked.ask, grant, sentAtMs, this.clock());
        this.save(record);
        if (record.share !== null) await this.ctx.storage.setAlarm(record.share.endsAtMs);
      } catch (error) {
        // No share: batches pass through to the key's object until a renewal succeeds.
        this.save({ ...this.load(), share: null });
        logEvent("warn", { event: "delegate_renew_failed", error: messageOf(error) });
      } finally {
        this.renewing = null;
      }
    })();
    return this.renewing;
  }

  override async alarm(): Promise<void> {
    const record = this.load();
    const who = this.ctx.storage.kv.get<Who>(WHO_KEY);
    const now = this.clock();
    const share = record.share;
    if (
      who !== undefined &&
      share !== null &&
      share.kind === "window" &&
      share.unitsLeft > 0 &&
      now >= share.endsAtMs
    ) {
      await this.renew(who, true);
    }
    const after = this.load();
    const lastCallMs = after.calls.at(-1)?.atMs ?? 0;
    if (delegateIdle(after, now) && now - lastCallMs >= DELEGATE_IDLE_MS) {
      this.record = NEW_DELEGATE;
      await this.ctx.storage.deleteAll();
      return;
    }
    await this.ctx.storage.setAlarm(Math.max(now + 1, Math.min(lastCallMs + DELEGATE_IDLE_MS, share?.endsAtMs ?? now)));
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
