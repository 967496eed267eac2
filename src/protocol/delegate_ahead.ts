/**
 * Window shares granted ahead: the delegate's side (window_ahead.ts has the key's object's). A window share renewed
 * shortly before its window's end comes with units of the next window (`ShareGrant.ahead`). The delegate keeps them
 * beside its share (`HeldShare.ahead`) and, once the share has ended, takes them as its share from the next window's
 * start (`rollAhead`), instead of renewing at the window's turn with every other delegate. Until then its share does
 * not renew in the background (delegate_demand.ts `renewDue`); a renewal for another reason gives them back.
 *
 * When the units may be used, on this delegate's clock: the key's object granted them at its clock's `atMs` of the
 * grant, cutting the share's term at the window's end (`termMs` from then). The share is used until the ask's sending
 * plus `termMs` (before the object's grant, so before the window's end on the object's clock whatever the clocks'
 * offset); the units ahead from the answer's arrival plus `termMs` (after the grant, so after the window's end).
 * Batches in between (at most the ask's round trip) wait for them (delegate_run.ts). Pure functions.
 */
import type { ShareGrant } from "./share.ts";

/** What these need of a delegate's share (delegate.ts `HeldShare`). */
interface AheadShare {
  readonly kind: "rate" | "window";
  readonly atMs: number;
  readonly endsAtMs: number;
  readonly renewAtMs: number;
  readonly units: number;
  readonly unitsLeft: number;
  readonly short: boolean;
  readonly lent?: number;
  readonly ahead?: AheadHeld;
}
/** What these need of a delegate's record (delegate.ts `DelegateRecord`). */
interface AheadRecord {
  readonly share: AheadShare | null;
}

/** Units of the next window a delegate holds ahead. */
export interface AheadHeld {
  readonly units: number;
  /** The key's object's clock at the next window's start, ms (their refunds name it). */
  readonly atMs: number;
  /** This delegate's clock from when they may be used, ms. */
  readonly fromMs: number;
  /** This delegate's clock when the share they become ends, ms. */
  readonly endsAtMs: number;
}

/** The units ahead a window grant (asked at `sentAtMs`, answered at `nowMs`) brings, as a field of the share. */
export function aheadHeld(grant: ShareGrant, sentAtMs: number, nowMs: number): { readonly ahead?: AheadHeld } {
  const a = grant.ahead;
  if (a === undefined || !(a.units >= 1) || !(a.termMs >= 1)) return {};
  const fromMs = nowMs + grant.termMs;
  return { ahead: { units: a.units, atMs: a.atMs, fromMs, endsAtMs: sentAtMs + grant.termMs + a.termMs } };
}

/**
 * Whether a window share granted `grant` for `asked` units is short (refusing beyond its units until its term ends,
 * delegate.ts `delegateNeed`): cut, and the window spent; or, with units ahead, less left in it than asked. A cut share
 * otherwise asks again once its units are used, but not in its window's last 500 ms for the little that is left, while
 * it holds the next window's units (cluster simulation, hot-window 1,000 isolates at 10k req/s, an override lowering
 * the limit: 287 share asks in a second, 197 with this; holding every cut share with units ahead left a steady row's
 * window 0.26 points short).
 */
export function windowShort(grant: ShareGrant, asked: number): boolean {
  return grant.units < asked && (grant.remaining === 0 || (grant.ahead !== undefined && grant.remaining < asked));
}

/**
 * How long a batch at `nowMs` waits for the share's units ahead: from the share's end until they may be used (0: it
 * need not wait).
 */
export function aheadWaitMs(record: AheadRecord, nowMs: number): number {
  const share = record.share;
  const ahead = share?.ahead;
  if (share == null || ahead === undefined || nowMs < share.endsAtMs) return 0;
  return Math.max(0, ahead.fromMs - nowMs);
}

/**
 * The record with its units ahead taken as its share, once the share has ended and they may be used: the units of the
 * next window, charged at its start (`atMs`), until their term's end, renewed in its last quarter. What the old share
 * held is of a window gone by: nothing to give back. The very same record otherwise.
 */
export function rollAhead<R extends AheadRecord>(record: R, nowMs: number): R {
  const share = record.share;
  const ahead = share?.ahead;
  if (share == null || ahead === undefined || nowMs < share.endsAtMs || nowMs < ahead.fromMs) return record;
  const { ahead: _ahead, lent: _lent, ...rest } = share;
  const termMs = Math.max(1, ahead.endsAtMs - ahead.fromMs);
  const next = {
    ...rest,
    atMs: ahead.atMs,
    endsAtMs: ahead.endsAtMs,
    renewAtMs: ahead.endsAtMs - Math.floor(termMs / 4),
    units: ahead.units,
    unitsLeft: ahead.units,
    short: false,
  } as NonNullable<R["share"]>;
  return { ...record, share: next };
}

/**
 * Whether the shell's alarm at a window share's end gives its unused units back (a release): a window share, ended,
 * with units left, and none ahead (those are the next window's: the share goes on with them).
 */
export function releaseDue(record: AheadRecord, nowMs: number): boolean {
  const share = record.share;
  return (
    share !== null &&
    share.kind === "window" &&
    share.unitsLeft > 0 &&
    nowMs >= share.endsAtMs &&
    share.ahead === undefined
  );
}
