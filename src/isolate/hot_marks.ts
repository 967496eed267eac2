/** A data center's hot marks: what one isolate learned of a hot key, for the others there (a hint). */

import { type AlgorithmParams, leasePolicy } from "../algorithms/index.ts";
import { HOT_FROM_PER_S, HOT_MARK_TTL_MS, MARKS_REMEMBERED } from "../protocol/tunables.ts";
import type { HotMark } from "./coalesce_types.ts";
import { decayedSpread } from "./key_state.ts";

/** A data center's marks: read one (`null`: none, or it could not be read), write one (best effort). */
export interface HotMarkStore {
  read(name: string): Promise<StoredMark | null>;
  write(name: string, mark: StoredMark): Promise<void>;
}

/** A mark: the key's spread as of `atMs` (the writer's clock; absent: as of reading); an older Worker's `true`: 1. */
export type StoredMark = { readonly spread: number | boolean; readonly atMs?: number };

/** A stored mark's spread at `nowMs`, in [0, 1] (0: none), decayed since it was written. */
function spreadOf(stored: StoredMark | null, nowMs: number): number {
  const spread = Number(stored?.spread ?? 0);
  return spread > 0 ? decayedSpread(Math.min(1, spread), nowMs - (stored?.atMs ?? nowMs)) : 0;
}

/** The mark an isolate takes from a stored one at `nowMs`; a key `hot` by construction is marked without one. */
export function markFrom(stored: StoredMark | null, nowMs: number, hot = false): HotMark | null {
  if (stored === null && !hot) return null;
  return { untilMs: nowMs + HOT_MARK_TTL_MS, spread: spreadOf(stored, nowMs) };
}

/** Whether a rule's keys are hot by construction: its rate is `HOT_FROM_PER_S` or more (docs/production.md, "When"). */
export function hotByConstruction(params: AlgorithmParams): boolean {
  const policy = leasePolicy(params.algorithm);
  if (policy.kind === "rate") return policy.refillOver(params, 1000) >= HOT_FROM_PER_S;
  if (policy.kind !== "window") return false;
  // Windows are aligned to the epoch: the first one's length, from 0, is every one's (a month's, 31 days).
  const windowMs = policy.termMs(params, 0, 31 * 86_400_000);
  return policy.limit(params) * 1000 >= HOT_FROM_PER_S * windowMs;
}

/** Write `mark` (best effort), unless the stored spread is higher (both as of now): take it (docs/production.md). */
export async function writeMark(
  store: HotMarkStore,
  name: string,
  mark: HotMark,
  spreadHere: (spread: number) => void,
  clock: () => number,
): Promise<void> {
  const read = await store.read(name);
  const nowMs = clock();
  const stored = spreadOf(read, nowMs);
  if (stored > mark.spread) spreadHere(stored);
  else await store.write(name, mark.decays === true ? { spread: mark.spread, atMs: nowMs } : { spread: mark.spread });
}

/** Reads the spread of `store`'s mark of a key now (`AskInput.spreadMark`; `null`: no mark). */
export function spreadOfMark(store: HotMarkStore, clock: () => number): (name: string) => Promise<number | null> {
  return async (name) => {
    const stored = await store.read(name);
    return stored === null ? null : spreadOf(stored, clock());
  };
}

/** What one isolate wrote lately, by key (to write each mark once per half ttl, not on every request). */
export class WrittenMarks {
  private readonly written = new Map<string, { readonly spread: number; readonly atMs: number }>();

  /** Whether to write `mark` for `name` now (none yet, its spread raised since, or half a ttl ago); if so, noted. */
  take(name: string, mark: HotMark | null, nowMs: number): boolean {
    const last = this.written.get(name);
    if (mark === null) return false;
    if (last !== undefined && mark.spread <= last.spread && nowMs - last.atMs < HOT_MARK_TTL_MS / 2) return false;
    this.written.delete(name);
    this.written.set(name, { spread: mark.spread, atMs: nowMs });
    if (this.written.size > MARKS_REMEMBERED) this.written.delete(this.written.keys().next().value!);
    return true;
  }
}
