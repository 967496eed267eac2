/**
 * Concurrency (NGINX's `limit_conn`): at most `limit` cost of a key in flight at once.
 *
 * Promise: an admitted request holds a slot of its cost until it is given back (`slots.release`: the response was read
 * to the end, the client went away, the request failed) or its lease of `slot_ttl` ends (renewed by `slots.renew`
 * while the request runs), so the slots held never add up to more than `limit`, and a dead isolate's slots come back
 * within `slot_ttl` of their last renewal. State: each slot's id, taking (or renewal) time
 * and cost, and the next id. Ids grow with the clock (`now × 1000` at least), so a release is idempotent and a late one
 * frees nobody else's slot, even after the record was dropped and made again.
 * Pros: caps work in progress (exports, uploads), whatever their rate. Cons: only as exact as its releases; one object
 * call more per request, and a renewal per half `slot_ttl` of a long one. Pick it for slow, expensive requests.
 *
 * With no release in between, the decisions are a sliding log's whose entries live `slot_ttl`: `remaining` is `limit`
 * less the cost held, `reset_after_ms` the time until the newest lease ends, `retry_after_ms` until enough leases end.
 */
import { slotKernel } from "./concurrency_rows.ts";
import type { Algorithm, CheckOutcome } from "./types.ts";

export interface ConcurrencyParams {
  readonly algorithm: "concurrency";
  /** The most cost in flight at once. */
  readonly limit: number;
  /** How long a slot is held at most, ms (a lease: given back then if no release came). Default `SLOT_TTL_MS`. */
  readonly slotTtlMs: number;
}

/** One slot held. */
export interface Slot {
  /** Unique per key, increasing: what a release names. */
  readonly id: number;
  /** When it was taken or last renewed, ms (the key's clock): its lease ends `slotTtlMs` later. */
  readonly atMs: number;
  readonly cost: number;
}

export interface ConcurrencyState {
  /** The id the next slot gets at least. */
  readonly next: number;
  /** The slots held, oldest lease first (taken or last renewed; times non-decreasing). */
  readonly slots: readonly Slot[];
}

/** The default lease of a slot, ms: 60 s. */
export const SLOT_TTL_MS = 60_000;
/** The most a concurrency limit may be: every slot is kept one by one in the key's record. */
export const MAX_CONCURRENCY = 10_000;
/** Slot ids per ms of the clock: ids are `now × 1000` at least, unique while fewer slots are taken per ms. */
const IDS_PER_MS = 1000;

/** The slots still held at `nowMs` (a lease ends at `atMs + slotTtlMs`). */
function liveAt(params: { readonly slotTtlMs: number }, slots: readonly Slot[], nowMs: number): readonly Slot[] {
  let first = 0;
  while (first < slots.length && nowMs - slots[first]!.atMs >= params.slotTtlMs) first++;
  return first === 0 ? slots : slots.slice(first);
}

function heldOf(slots: readonly Slot[]): number {
  let held = 0;
  for (const s of slots) held += s.cost;
  return held;
}

/** The clock rule: never judge at a time earlier than the newest slot. */
function clockOf(state: ConcurrencyState | null, nowMs: number): number {
  const newest = state?.slots.at(-1);
  return newest === undefined ? nowMs : Math.max(nowMs, newest.atMs);
}

export const concurrency: Algorithm<ConcurrencyParams, ConcurrencyState> = {
  params: {
    keys: ["limit", "slot_ttl"],
    takes: "limit, and optionally slot_ttl",
    capacityName: "limit",
    read(r) {
      const limit = r.int("limit");
      const slotTtlMs = r.duration("slot_ttl", SLOT_TTL_MS);
      if (limit === undefined || slotTtlMs === undefined) return null;
      if (limit > MAX_CONCURRENCY) {
        r.error("limit", `must be at most ${MAX_CONCURRENCY} for concurrency (each slot is kept), got ${limit}`);
        return null;
      }
      if (slotTtlMs < 1000) {
        r.error("slot_ttl", `must be at least 1s (a slot's lease must outlive its request), got ${slotTtlMs}ms`);
        return null;
      }
      return { algorithm: "concurrency", limit, slotTtlMs };
    },
  },
  project: ({ algorithm, limit, slotTtlMs }) => ({ algorithm, limit, slotTtlMs }),
  capacity: (params) => params.limit,
  check(params, state, cost, nowMs): CheckOutcome<ConcurrencyState> {
    const now = clockOf(state, nowMs);
    const slots = liveAt(params, state?.slots ?? [], now);
    const held = heldOf(slots);
    if (held + cost <= params.limit) {
      const id = Math.max(state?.next ?? 0, now * IDS_PER_MS);
      return {
        decision: {
          allowed: true,
          remaining: params.limit - held - cost,
          resetAfterMs: params.slotTtlMs,
          retryAfterMs: null,
          delayMs: 0,
        },
        state: { next: id + 1, slots: [...slots, { id, atMs: now, cost }] },
      };
    }
    // With no release, the oldest leases end first: wait until enough of them have for this cost to fit.
    const excess = held + cost - params.limit;
    let freed = 0;
    let k = 0;
    while (freed < excess) freed += slots[k++]!.cost;
    return {
      decision: {
        allowed: false,
        // never below 0: slots carried over can exceed a lowered limit
        remaining: Math.max(0, params.limit - held),
        resetAfterMs: slots.length === 0 ? 0 : slots.at(-1)!.atMs + params.slotTtlMs - now,
        retryAfterMs: slots[k - 1]!.atMs + params.slotTtlMs - now,
        delayMs: 0,
      },
      state: state as ConcurrencyState,
    };
  },

  // Another rule refused the request: give back the slot it just took (the newest of its cost taken then). Its id
  // is not reused.
  refund(_params, state, cost, admittedAtMs) {
    for (let i = state.slots.length - 1; i >= 0; i--) {
      const s = state.slots[i]!;
      if (s.atMs === admittedAtMs && s.cost === cost) {
        return { next: state.next, slots: [...state.slots.slice(0, i), ...state.slots.slice(i + 1)] };
      }
    }
    return state;
  },

  // Not before the ms after the last id's either: a record dropped then starts its ids later (`IDS_PER_MS`), so an old
  // id never names a new slot.
  freshAtMs(params, state) {
    const newest = state.slots.at(-1);
    const idsUntilMs = Math.ceil(state.next / IDS_PER_MS);
    return newest === undefined ? idsUntilMs : Math.max(idsUntilMs, newest.atMs + params.slotTtlMs);
  },

  // The slots are kept and judged by the new limit and lease (a lower limit then refuses until enough are back).
  carryOver: (_prev, _next, state) => state,

  // `q` slots per lease: the longest a slot is held without a release.
  headerWindowMs: (params) => params.slotTtlMs,
  peakSpanMs: (params) => params.slotTtlMs,
  describe: (params, words) => `concurrency ${params.limit} in flight, slot_ttl ${words.span(params.slotTtlMs)}`,
  denialsCount: () => false,
  smallerDeniedUntilMs: () => null,

  // A slot is held by one request until it is given back: only the key's object sees every take and every release.
  lease: {
    kind: "none",
    why: "a slot is held by one request until it is given back; only the key's object counts them",
  },

  slots: {
    taken: (state) => state.next - 1,
    release(params, state, slotId, nowMs) {
      const i = state.slots.findIndex((s) => s.id === slotId);
      if (i < 0) return state;
      const slots = liveAt(params, [...state.slots.slice(0, i), ...state.slots.slice(i + 1)], clockOf(state, nowMs));
      return { next: state.next, slots };
    },
    // The renewed slot moves to the end: the list stays in taking (now: renewal) order, which `liveAt` relies on.
    renew(params, state, slotId, nowMs) {
      const now = clockOf(state, nowMs);
      const slots = liveAt(params, state.slots, now);
      const i = slots.findIndex((s) => s.id === slotId);
      if (i < 0) return state;
      const renewed = { ...slots[i]!, atMs: now };
      return { next: state.next, slots: [...slots.slice(0, i), ...slots.slice(i + 1), renewed] };
    },
    leaseMs: (params) => params.slotTtlMs,
    heldAt: (params, state, nowMs) => (state === null ? 0 : heldOf(liveAt(params, state.slots, nowMs))),
    rows: { compile: slotKernel },
  },

  level: {
    name: "in flight",
    label: (params) => `limit ${params.limit}`,
    at(params, state, tMs) {
      if (state === null) return 0;
      let held = 0;
      for (const s of state.slots) if (s.atMs <= tMs && tMs - s.atMs < params.slotTtlMs) held += s.cost;
      return held;
    },
  },
};
