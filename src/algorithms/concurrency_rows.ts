/**
 * Concurrency's slots on a typed row, decided, taken, given back and renewed in place: the replay's fast path
 * (src/replay/states.ts), no state object or slots array per decision. The row is `next, n`, then `limit` slots of
 * `id, atMs, cost` side by side, the first `n` held, oldest lease first (as `ConcurrencyState.slots`). An admission
 * keeps at most `limit` cost live, each slot at least 1, so `n <= limit` and the row never overflows; a slot leaves
 * from anywhere (a release, a renewal moving it to the end), so the slots are shifted down, O(limit) at most.
 *
 * Each operation is `concurrency.ts`'s, step for step (the same clock rule, the same expired prefix dropped, a denial
 * or an unknown id leaving the row as it was): test/unit/concurrency.rows.test.ts drives both side by side. Above
 * `MAX_ROW_SLOTS` a row would be wide for the few slots a key usually holds: the shell keeps the state objects then.
 */
import { admitInto, checkFromInto, refuseInto } from "./scratch.ts";
import type { DecisionScratch, RowChange, RowKernel, SlotRowKernel } from "./types.ts";

/** The widest limit kept on a row: 64 slots, 194 float64 fields (1,552 bytes a key). */
export const MAX_ROW_SLOTS = 64;
/** Slot ids per ms of the clock (concurrency.ts's `IDS_PER_MS`). */
const IDS_PER_MS = 1000;
const NEXT = 0;
const COUNT = 1;
const FIRST = 2;
const SLOT = 3;
const ID = 0;
const AT = 1;
const COST = 2;

/** The state a row holds: concurrency.ts's `ConcurrencyState`, by shape (that file imports this one). */
interface RowState {
  readonly next: number;
  readonly slots: readonly { readonly id: number; readonly atMs: number; readonly cost: number }[];
}

interface Params {
  readonly limit: number;
  readonly slotTtlMs: number;
}

/** The kernel for these parameters, or `null` above `MAX_ROW_SLOTS`. */
export function slotKernel(params: Params): SlotRowKernel<RowState> | null {
  if (params.limit > MAX_ROW_SLOTS) return null;
  const { limit, slotTtlMs } = params;
  const into: RowKernel<RowState>["into"] = (row, at, _fresh, cost, nowMs, d, out) =>
    checkRow(limit, slotTtlMs, row, at, cost, nowMs, d, out);
  return {
    width: FIRST + SLOT * limit,
    check: checkFromInto(into),
    into,
    refund: refundRow,
    read(row, at) {
      const n = row[at + COUNT]!;
      const slots: { id: number; atMs: number; cost: number }[] = [];
      for (let j = 0, s = at + FIRST; j < n; j++, s += SLOT) {
        slots.push({ id: row[s + ID]!, atMs: row[s + AT]!, cost: row[s + COST]! });
      }
      return { next: row[at + NEXT]!, slots };
    },
    taken: (row, at) => row[at + NEXT]! - 1,
    release: (row, at, slotId, nowMs) => releaseRow(slotTtlMs, row, at, slotId, nowMs),
    renew: (row, at, slotId, nowMs) => renewRow(slotTtlMs, row, at, slotId, nowMs),
    heldAt(row, at, nowMs) {
      const n = row[at + COUNT]!;
      return heldFrom(row, at, expiredPrefix(slotTtlMs, row, at, n, nowMs), n);
    },
  };
}

/** The clock rule (`clockOf`): never judge at a time earlier than the newest slot's. */
function clockOf(row: Float64Array, at: number, n: number, nowMs: number): number {
  return n === 0 ? nowMs : Math.max(nowMs, row[at + FIRST + SLOT * (n - 1) + AT]!);
}

/** How many of the first slots' leases have ended at `nowMs` (`liveAt` drops them). */
function expiredPrefix(slotTtlMs: number, row: Float64Array, at: number, n: number, nowMs: number): number {
  let first = 0;
  while (first < n && nowMs - row[at + FIRST + SLOT * first + AT]! >= slotTtlMs) first++;
  return first;
}

function heldFrom(row: Float64Array, at: number, from: number, n: number): number {
  let held = 0;
  for (let j = from; j < n; j++) held += row[at + FIRST + SLOT * j + COST]!;
  return held;
}

/** Move slots `[from, to)` down to start at slot `dest` (`dest <= from`). */
function shiftDown(row: Float64Array, at: number, dest: number, from: number, to: number): void {
  if (dest === from || from >= to) return;
  row.copyWithin(at + FIRST + SLOT * dest, at + FIRST + SLOT * from, at + FIRST + SLOT * to);
}

function checkRow(
  limit: number,
  slotTtlMs: number,
  row: Float64Array,
  at: number,
  cost: number,
  nowMs: number,
  d: DecisionScratch,
  out: RowChange,
): void {
  const n = row[at + COUNT]!;
  const now = clockOf(row, at, n, nowMs);
  const first = expiredPrefix(slotTtlMs, row, at, n, now);
  const held = heldFrom(row, at, first, n);
  if (held + cost <= limit) {
    const id = Math.max(row[at + NEXT]!, now * IDS_PER_MS);
    shiftDown(row, at, 0, first, n);
    const live = n - first;
    const s = at + FIRST + SLOT * live;
    row[s + ID] = id;
    row[s + AT] = now;
    row[s + COST] = cost;
    row[at + COUNT] = live + 1;
    row[at + NEXT] = id + 1;
    admitInto(d, limit - held - cost, slotTtlMs, 0);
    out.changed = true;
    return;
  }
  // With no release, the oldest leases end first: wait until enough of them have for this cost to fit.
  const excess = held + cost - limit;
  let freed = 0;
  let k = first;
  while (freed < excess) freed += row[at + FIRST + SLOT * k++ + COST]!;
  refuseInto(
    d,
    // never below 0: slots carried over can exceed a lowered limit
    Math.max(0, limit - held),
    n === first ? 0 : row[at + FIRST + SLOT * (n - 1) + AT]! + slotTtlMs - now,
    row[at + FIRST + SLOT * (k - 1) + AT]! + slotTtlMs - now,
  );
  out.changed = false;
}

/** Remove slot `i` of `n`. */
function removeSlot(row: Float64Array, at: number, i: number, n: number): void {
  shiftDown(row, at, i, i + 1, n);
  row[at + COUNT] = n - 1;
}

// The newest slot of `cost` taken at `admittedAtMs` leaves; its id is not reused (`concurrency.refund`).
function refundRow(row: Float64Array, at: number, cost: number, admittedAtMs: number): void {
  const n = row[at + COUNT]!;
  for (let i = n - 1; i >= 0; i--) {
    const s = at + FIRST + SLOT * i;
    if (row[s + AT] === admittedAtMs && row[s + COST] === cost) {
      removeSlot(row, at, i, n);
      return;
    }
  }
}

// The slot leaves wherever it is; then the leases ended by the clock (taken before it left) are dropped.
function releaseRow(slotTtlMs: number, row: Float64Array, at: number, slotId: number, nowMs: number): void {
  const n = row[at + COUNT]!;
  let i = 0;
  while (i < n && row[at + FIRST + SLOT * i + ID] !== slotId) i++;
  if (i === n) return;
  const now = clockOf(row, at, n, nowMs);
  removeSlot(row, at, i, n);
  const first = expiredPrefix(slotTtlMs, row, at, n - 1, now);
  shiftDown(row, at, 0, first, n - 1);
  row[at + COUNT] = n - 1 - first;
}

// Only a live slot is renewed, and only then are the ended leases dropped (`renew` returns its state as it was).
function renewRow(slotTtlMs: number, row: Float64Array, at: number, slotId: number, nowMs: number): void {
  const n = row[at + COUNT]!;
  const now = clockOf(row, at, n, nowMs);
  const first = expiredPrefix(slotTtlMs, row, at, n, now);
  let i = first;
  while (i < n && row[at + FIRST + SLOT * i + ID] !== slotId) i++;
  if (i === n) return;
  const cost = row[at + FIRST + SLOT * i + COST]!;
  // [first, i) and (i, n) down to 0, then the renewed slot at the end, its lease started again now.
  shiftDown(row, at, 0, first, i);
  shiftDown(row, at, i - first, i + 1, n);
  const live = n - first;
  const s = at + FIRST + SLOT * (live - 1);
  row[s + ID] = slotId;
  row[s + AT] = now;
  row[s + COST] = cost;
  row[at + COUNT] = live;
}
