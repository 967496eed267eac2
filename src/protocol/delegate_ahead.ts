/**
 * Window shares granted ahead, the delegate's side (window_ahead.ts: the object's). It keeps the next window's units
 * beside its share and takes them as its share once it ended (`rollAhead`), instead of renewing at the window's turn
 * with every delegate. Whatever the clocks' offset: the share is used until the ask's send plus `termMs` (before the
 * window's end), the units ahead from the answer's arrival plus `termMs` (after it); batches between wait. Pure.
 */
import type { ShareGrant } from "./share.ts";
import type { SubleaseSource } from "./sublease.ts";

/** What these need of a delegate's share (delegate.ts `HeldShare`). */
type AheadShare = Omit<SubleaseSource, "rule" | "parts" | "state"> & {
  readonly renewAtMs: number;
  readonly ahead?: AheadHeld;
};
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
 * Whether a window share granted `grant` for `asked` is short (refusing beyond its units until its term ends): cut
 * with the window spent, or with units ahead and less left than asked (not asking again for the little left).
 */
export function windowShort(grant: ShareGrant, asked: number): boolean {
  return grant.units < asked && (grant.remaining === 0 || (grant.ahead !== undefined && grant.remaining < asked));
}

/** How long a batch at `nowMs` waits for the share's units ahead (from the share's end until usable; 0: none). */
export function aheadWaitMs(record: AheadRecord, nowMs: number): number {
  const share = record.share;
  const ahead = share?.ahead;
  if (share == null || ahead === undefined || nowMs < share.endsAtMs) return 0;
  return Math.max(0, ahead.fromMs - nowMs);
}

/**
 * The record with its units ahead taken as its share once the old one ended and they are usable (renewed in their
 * term's last quarter; the old units, of a window gone by, are not given back). The very same record otherwise.
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

/** Whether the alarm at a window share's end gives its units left back: none ahead (the share goes on with those). */
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
