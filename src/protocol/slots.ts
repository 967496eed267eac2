/**
 * Giving slots back (algorithms whose admitted requests hold a slot until they end: concurrency). A pure function of
 * (record, input, now), like the rest of the record protocol: the Durable Object (src/object/limiter.ts) and the
 * simulator are shells around it. A release names its slots by id: one that is no longer held (released already, its
 * lease over) changes nothing, so a release is idempotent and a late one frees nobody else's slot.
 *
 * Slots never go through the delegate tier: their algorithm takes no leases (`lease.kind` "none"), so its keys are
 * never hot and every take and every release is the key's object's (docs/rules.md, "Concurrency").
 */
import { type AlgorithmParams, type AlgorithmState, slotPolicy } from "../algorithms/index.ts";
import type { LimiterRecord, LimiterRule } from "./record.ts";

/**
 * The waits before each retry of a release the key's object refused as overloaded (or with a retryable error, or a
 * reset), ms: each jittered to between half and all of it. A release frees capacity, so it is retried, unlike a
 * take; one never given back is held until its lease (`slot_ttl`) ends.
 */
export const RELEASE_RETRY_MS: readonly number[] = [250, 1_000, 4_000];

export interface ReleaseInput {
  /** The rule the slots were taken under (for its id in messages; the record's own parameters decide). */
  readonly rule: LimiterRule;
  /** The ids of the slots to give back (`CheckResult.slot`). */
  readonly slots: readonly number[];
}

export interface ReleaseResult {
  /** How many of the slots named were held and are now given back (or renewed). */
  readonly released: number;
  /** The cost still held in slots after the release. */
  readonly held: number;
  /** The limiter's clock, ms. */
  readonly atMs: number;
}

/** Give back the slots named; `record` is the very same object when none of them was held. */
export function releaseRecord(
  record: LimiterRecord | null,
  input: ReleaseInput,
  nowMs: number,
): { readonly result: ReleaseResult; readonly record: LimiterRecord | null } {
  return slotChange(record, input, nowMs, "release");
}

/**
 * Start the leases of the slots named again at `nowMs` (their requests still run: the gateway renews every half
 * `slot_ttl` while a response streams); `released` counts the slots renewed. A slot whose lease ended is not revived.
 */
export function renewRecord(
  record: LimiterRecord | null,
  input: ReleaseInput,
  nowMs: number,
): { readonly result: ReleaseResult; readonly record: LimiterRecord | null } {
  return slotChange(record, input, nowMs, "renew");
}

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
  const held = policy.heldAt(record.params, state, nowMs);
  const result = { released, held, atMs: nowMs };
  return { result, record: state === record.state ? record : { ...record, state } };
}

/** Whether the rule's requests hold a slot until they end. */
export function holdsSlots(params: AlgorithmParams): boolean {
  return slotPolicy(params) !== undefined;
}
