/**
 * Giving slots back (concurrency: an admitted request holds a slot until it ends), pure. By id: idempotent, and a
 * late release frees nobody else's. Never at delegates: the algorithm takes no leases (docs/rules.md, "Concurrency").
 */
import { type AlgorithmParams, type AlgorithmState, slotPolicy } from "../algorithms/index.ts";
import type { LimiterRecord, LimiterRule } from "./record.ts";

/** The waits before each retry of a failed release, ms, jittered to half to all (unretried, one ends at `slot_ttl`). */
export const RELEASE_RETRY_MS: readonly number[] = [250, 1_000, 4_000];

export interface ReleaseInput {
  /** The rule the slots were taken under (for its id in messages; the record's own parameters decide). */
  readonly rule: LimiterRule;
  /** The ids of the slots to give back (`CheckResult.slot`). */
  readonly slots: readonly number[];
}

/** Of the slots named, how many were held and are given back (or renewed); the cost still held; the clock, ms. */
export type ReleaseResult = { readonly released: number; readonly held: number; readonly atMs: number };

/** Give back the slots named; `record` is the very same object when none of them was held. */
export const releaseRecord = (record: LimiterRecord | null, input: ReleaseInput, nowMs: number) =>
  slotChange(record, input, nowMs, "release");

/** Start the slots' leases again at `nowMs` (a response still streams); an ended one stays so. */
export const renewRecord = (record: LimiterRecord | null, input: ReleaseInput, nowMs: number) =>
  slotChange(record, input, nowMs, "renew");

function slotChange(record: LimiterRecord | null, input: ReleaseInput, nowMs: number, change: "release" | "renew") {
  const policy = record === null ? undefined : slotPolicy(record.params);
  if (record === null || policy === undefined) return { result: { released: 0, held: 0, atMs: nowMs }, record };
  let state: AlgorithmState = record.state;
  let released = 0;
  for (const id of input.slots) {
    if (!Number.isSafeInteger(id)) continue;
    const next = policy[change](record.params, state, id, nowMs);
    if (next !== state) released++;
    state = next;
  }
  const result = { released, held: policy.heldAt(record.params, state, nowMs), atMs: nowMs };
  return { result, record: state === record.state ? record : { ...record, state } };
}

/** Whether the rule's requests hold a slot until they end. */
export const holdsSlots = (params: AlgorithmParams): boolean => slotPolicy(params) !== undefined;
