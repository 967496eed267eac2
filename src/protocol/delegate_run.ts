/** A delegate's steps around its pure decisions (delegate.ts), with its shell's storage, clock and key's object. */
import { fingerprintOf } from "../algorithms/index.ts";
import { adoptGrant, type DelegateRecord, delegateCall, delegateNeed, renewDue, shareAsk } from "./delegate.ts";
import { aheadWaitMs, rollAhead } from "./delegate_record.ts";
import { uses } from "./mechanisms.ts";
import { classify, firstAnswer, messageOf } from "./object_call.ts";
import type { ShareAsk, ShareGrant } from "./share.ts";
import {
  type CallInput,
  type CallResult,
  type LimiterRule,
  refusedCall,
  remembersSince,
  unsureResult,
} from "./store.ts";
import { takeBack } from "./sublease.ts";
import {
  DELEGATE_CALL_MEMORY,
  DELEGATE_KEY_TIMEOUT_MS,
  DELEGATE_RENEW_BACKOFF_MS,
  DELEGATE_RESEND_MS,
  HOT_EXIT_PER_S,
  SHARE_TERM_MS,
  SHED_MARGIN_MS,
} from "./tunables.ts";

/** Whom a delegate works for: the key's object, the holder id it is known by there, and the rule it last saw. */
export type DelegateWho = { readonly object: string; readonly holder: string; readonly rule: LimiterRule };

/** What a delegate's steps need from their shell. */
export interface DelegatePorts {
  readonly clock: () => number;
  readonly newId: () => string;
  /** The stored record (`NEW_DELEGATE` when none), and a durable write of it (done before any answer is given). */
  readonly load: () => DelegateRecord;
  readonly save: (record: DelegateRecord) => void;
  /** The key's object: a batch passed through (`SluiceLimiter.check`), and a share asked for (`share`). */
  readonly call: (object: string, input: CallInput) => Promise<CallResult>;
  readonly share: (object: string, ask: ShareAsk) => Promise<ShareGrant>;
  /** After a share was adopted (the shell may arm an alarm for its end). */
  readonly adopted?: (record: DelegateRecord, who: DelegateWho) => void | Promise<void>;
  /** A renewal failed (for the log). */
  readonly failed?: (message: string) => void;
  /** Wait this long, ms (for a window share's units ahead: delegate_record.ts). Absent: such a batch renews instead. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** The first batch, asking no sub-lease, passes through while the first ask is out (absent: it waits for it). */
  readonly passFirst?: boolean;
}

export class DelegateRun {
  private renewing: Promise<void> | null = null;
  /** Until when an overloaded answer to a share ask holds this delegate back from the key's object (its clock). */
  private failedUntilMs = 0;
  /** When the key's object last said cold (`null`: not since a passed batch was answered hot or failed). */
  private coldAtMs: number | null = null;
  /** Whether this delegate asked for a share yet (since it started). */
  private asked = false;
  /** Cost passed through since the key's object said cold. */
  private passedCost = 0;
  /** Cost of the batches waiting for the renewal in flight. */
  private waitingCost = 0;
  /** A call of refused requests to the key's object is out (`passRefused`). */
  private passing = false;

  constructor(private readonly ports: DelegatePorts) {}

  /**
   * `send()`'s answer, or an `overloaded` failure if none within `DELEGATE_KEY_TIMEOUT_MS` (without `sleep`: `send()`).
   * Unanswered after `DELEGATE_RESEND_MS`, sent again (its id); the first answer taken, or if both fail the first's.
   */
  private async timed<T extends object>(send: (resent?: number) => Promise<T>): Promise<T> {
    const sleep = this.ports.sleep;
    if (sleep === undefined) return send();
    const first = send();
    const raced = await Promise.race([first.then((value) => ({ value })), sleep(DELEGATE_RESEND_MS).then(() => null)]);
    if (raced !== null) return raced.value;
    // The copy says when its first copy was sent at the earliest, and an answer `unsure` of it waits for the first.
    const known = (v: T) => ("unsure" in v && v.unsure === true ? Promise.reject(new Error("unsure")) : v);
    const answer = uses("resend") ? firstAnswer(first, send(DELEGATE_KEY_TIMEOUT_MS).then(known)) : first;
    const restMs = DELEGATE_KEY_TIMEOUT_MS - DELEGATE_RESEND_MS;
    const late = await Promise.race([answer.then((value) => ({ value })), sleep(restMs).then(() => null)]);
    if (late !== null) return late.value;
    const message = `the key's object did not answer the delegate within ${DELEGATE_KEY_TIMEOUT_MS} ms`;
    throw Object.assign(new Error(message), { overloaded: true });
  }

  /**
   * Decide an isolate's batch: renew first when `delegateNeed` says (at most twice), decide from the share, else pass
   * it through (or refuse it for a backoff after an overloaded ask); renew in the background when due, one at a time.
   */
  async check(who: DelegateWho, call: CallInput): Promise<CallResult> {
    const { clock, load, save, sleep } = this.ports;
    // A copy sent again (`resent`) it cannot tell from a first copy it forgot: nothing is applied (store.ts).
    if (!remembersSince(load().calls, DELEGATE_CALL_MEMORY, call, clock())) return unsureResult(clock());
    // A window share that ended with units of the next window: they become the share, once they may be used.
    const waitMs = aheadWaitMs(load(), clock());
    if (waitMs > 0 && sleep !== undefined) await sleep(waitMs);
    const rolled = rollAhead(load(), clock());
    if (rolled !== load()) save(rolled);
    // The units the batch gives back first: a renewal then takes them back to the key's object (delegate.ts).
    const taking = (call.giveBack ?? []).length > 0;
    const before = load().giveBack;
    if (taking) save(takeBack(load(), call, clock()));
    // The units this batch left for the key's object (none when a retry: `takeBack` takes a call's once).
    const parked = taking ? load().giveBack.filter((back) => !before.includes(back)) : [];
    const cost = call.costs.reduce((a, b) => a + b, 0);
    // A window share renews for a sub-lease's units too, once (the batch itself may renew twice).
    const asked = call.lease?.units;
    const leaseUnits = asked !== undefined && Number.isSafeInteger(asked) && asked > 0 ? asked : 0;
    // Every key of a fast rule comes here first (`hotByConstruction`): a quiet one's first batch then costs one call to
    // the key's object, not two. One that asks a sub-lease waits for the share it is cut from.
    const fresh = !this.asked && load().share === null && this.renewing === null && (call.lease ?? null) === null;
    this.asked = true;
    if (this.ports.passFirst === true && fresh) void this.renew(who, false, cost);
    else await this.renewFirst(who, call, cost, leaseUnits);
    const record = load();
    if (delegateNeed(record, call.rule, call.costs, clock()) === "renew" && !dry(record, call, clock())) {
      // The key's object could not be asked lately: refuse for the backoff rather than add a batch to its load; still
      // hot, so isolates stay.
      if (clock() < this.failedUntilMs)
        return { ...refusedCall(call, call.rule.params, this.failedUntilMs, clock()), hot: true };
      // Told cold a term ago or more, and batches still come at a tenth of a hot key's pace: ask again, in the
      // background. A quiet key's delegate asks nothing more.
      const sinceMs = this.coldAtMs === null ? 0 : clock() - this.coldAtMs;
      const coming = this.passedCost * SHARE_TERM_MS * 10 >= sinceMs * HOT_EXIT_PER_S;
      if (this.cold() && sinceMs >= SHARE_TERM_MS && coming && this.renewing === null) {
        this.coldAtMs = clock();
        this.passedCost = 0;
        void this.renew(who, false, cost);
      }
      this.passedCost += cost;
      // What this batch left for the key's object goes with it, unless a renewal took it there meanwhile: a quiet
      // key's delegate may never ask again. The rest, in the record, goes with the next ask or the alarm's release.
      const now = load();
      const still = parked.filter((back) => now.giveBack.includes(back));
      if (still.length > 0) save({ ...now, giveBack: now.giveBack.filter((back) => !still.includes(back)) });
      return this.passOn(who, taking ? { ...call, giveBack: still } : call);
    }
    // Its units given back were taken above, once: so marked again if the batches that came while it waited for a
    // renewal pushed its id out of the record's memory (`takeBack` would take them twice: a window admits them twice).
    const once = taking && !(record.taken ?? []).includes(call.id);
    const out = delegateCall(once ? { ...record, taken: [...(record.taken ?? []), call.id] } : record, call, clock());
    save(out.record);
    // After the batch is saved: a renewal takes a window share's unused units back at once (synchronously).
    if (renewDue(out.record, clock()) && this.renewing === null) void this.renew(who);
    return this.passRefused(who, call, out.result);
  }

  /** A call to the key's object, timed: unanswered, sent again as a copy `resent` ms after its first at the most. */
  private callKey(who: DelegateWho, input: CallInput): Promise<CallResult> {
    return this.timed((resent) => this.ports.call(who.object, resent === undefined ? input : { ...input, resent }));
  }

  /** A batch passed through to the key's object: its answer, said hot or cold; a failure leaves nothing known cold. */
  private async passOn(who: DelegateWho, input: CallInput): Promise<CallResult> {
    const result = await this.callKey(who, input).catch((error: unknown) => {
      this.coldAtMs = null;
      throw error;
    });
    if (result.hot === true) this.coldAtMs = null;
    const { busy: _objectBusy, ...passed } = result;
    return { ...passed, hot: result.hot === true };
  }

  /** A share with spare: what its slice refused goes to the key's object (docs/production.md, `spareHome`). */
  private async passRefused(who: DelegateWho, call: CallInput, result: CallResult): Promise<CallResult> {
    const { load, save } = this.ports;
    const share = load().share;
    const refused = result.results.flatMap((r, i) => (r.ok && !r.decision.allowed ? [i] : []));
    if (share?.spare !== true || this.passing || refused.length === 0) return result;
    if ((call.kind ?? "check") !== "check") return result;
    this.passing = true;
    const input = { rule: call.rule, id: `${call.id}:spare`, costs: refused.map((i) => call.costs[i]!) };
    const passed = await this.callKey(who, input).catch(() => null);
    this.passing = false;
    const results = result.results.map((r, i) => {
      const p = passed?.results[refused.indexOf(i)];
      return p?.ok === true && p.decision.allowed ? p : r;
    });
    const now = load().share;
    const dry = passed !== null && results.every((r, i) => r === result.results[i]);
    if (dry && now !== null && now.askId === share.askId) save({ ...load(), share: { ...now, spare: false } });
    return { ...result, results };
  }

  private cold(): boolean {
    return this.coldAtMs !== null && this.ports.load().share === null;
  }

  /** Renew before deciding when `delegateNeed` says so, at most twice; not while cold or backing off. */
  private async renewFirst(who: DelegateWho, call: CallInput, cost: number, leaseUnits: number): Promise<void> {
    const { clock, load } = this.ports;
    for (let i = 0; i < 2 && clock() >= this.failedUntilMs && !this.cold(); i++) {
      const extra = i === 0 ? leaseUnits : 0;
      if (delegateNeed(load(), call.rule, call.costs, clock(), extra) !== "renew") return;
      const startMs = clock();
      this.waitingCost += cost;
      await this.renew(who, false, cost + extra);
      // Still no live share (told cold, or a grant whose term ended on its way) while other batches waited: their pace
      // is asked for once more, rather than each of them passed through to the key's object (a cold start's crowd).
      const share = load().share;
      if ((share === null || clock() >= share.endsAtMs) && this.waitingCost > cost) {
        const spanMs = Math.max(clock() - startMs, SHARE_TERM_MS / 20);
        const perTerm = Math.ceil((this.waitingCost * SHARE_TERM_MS) / spanMs);
        this.waitingCost = 0;
        this.coldAtMs = null;
        await this.renew(who, false, perTerm);
      }
      if (this.renewing === null) this.waitingCost = 0;
    }
  }

  /**
   * Tokens a smaller grant's slice shed (delegate.ts `adoptGrant`) go to the key's object once the parts they filled
   * are its direct slice's (`freedAtMs`, its clock: reached here about half a round trip after the grant), in a call
   * of their own, before another delegate's grant takes those parts; taken out of the record first. Lost: lost.
   */
  private async sendShed(who: DelegateWho, grant: ShareGrant, sentAtMs: number): Promise<void> {
    const { clock, load, save, sleep } = this.ports;
    if (grant.freedAtMs === undefined || sleep === undefined) return;
    const shed = load().giveBack.filter((b) => b.shed === true && b.atMs === grant.freedAtMs);
    if (shed.length === 0) return;
    const aheadMs = grant.freedAtMs - grant.atMs - Math.floor((clock() - sentAtMs) / 2) + SHED_MARGIN_MS;
    if (aheadMs > 0) await sleep(aheadMs);
    const now = load();
    const still = shed.filter((b) => now.giveBack.includes(b));
    if (still.length === 0) return;
    save({ ...now, giveBack: now.giveBack.filter((b) => !still.includes(b)) });
    await this.callKey(who, { rule: who.rule, id: this.ports.newId(), costs: [], giveBack: still }).catch(() => null);
  }

  /** Renew the share with the key's object (or let it go: `release`). One renewal at a time. */
  renew(who: DelegateWho, release = false, pendingCost = 0): Promise<void> {
    this.renewing ??= this.renewOnce(who, release, pendingCost).finally(() => {
      this.renewing = null;
    });
    return this.renewing;
  }

  private async renewOnce(who: DelegateWho, release: boolean, pendingCost: number): Promise<void> {
    const { clock, load, save } = this.ports;
    // An unanswered renewal (a restart, a failure) is sent again as it was: its id, its send time (delegate.ts).
    const asked = shareAsk(load(), who.holder, who.rule, this.ports.newId(), clock(), release, pendingCost);
    // Units given back are no longer this delegate's, whatever the answer: a lost answer leaves the key short.
    save(asked.record);
    try {
      const grant = await this.timed(() => this.ports.share(who.object, asked.ask));
      const record = adoptGrant(load(), asked.ask, grant, asked.sentAtMs, clock());
      save(record);
      void this.sendShed(who, grant, asked.sentAtMs);
      this.coldAtMs = grant.kind === "none" && !grant.hot ? clock() : null;
      this.passedCost = 0;
      await this.ports.adopted?.(record, who);
    } catch (error) {
      // No share: batches pass through until a renewal succeeds; an overloaded object is left alone for a backoff.
      save({ ...load(), share: null });
      if (classify(error).failure === "overloaded") this.failedUntilMs = clock() + DELEGATE_RENEW_BACKOFF_MS;
      this.ports.failed?.(messageOf(error));
    }
  }
}

/**
 * A live window share left too short for the batch by the renewals before it: the batch is decided from it, not
 * passed through with all of the region's waiting batches; a request costing more than its last grant still is.
 */
function dry(record: DelegateRecord, call: CallInput, nowMs: number): boolean {
  const share = record.share;
  if (share === null || share.kind !== "window" || nowMs >= share.endsAtMs) return false;
  const newer = (call.rule.version ?? 0) > (share.rule.version ?? 0);
  if (newer && fingerprintOf(call.rule.params) !== fingerprintOf(share.rule.params)) return false;
  return call.costs.every((cost) => cost <= share.units);
}
