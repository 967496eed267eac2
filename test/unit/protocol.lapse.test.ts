/**
 * A rate share renewed late (docs/production.md, "Limits of the bound"): the key's object keeps its parts promised
 * `LAPSE_GRACE_MS` after its term's end (share.ts `partsUntilMs`), so a renewal within the grace finds them held
 * (`ShareGrant.held`) and its delegate's bucket keeps its refill since the end (delegate.ts `adoptGrant`), while the
 * direct slice did not refill those parts; after the grace the parts are the direct slice's, and the delegate carries
 * no refill after its end. Stands for the rate bound's premise that one side refills a part at a time.
 */
import { describe, expect, it } from "vitest";
import { sliceParams } from "../../src/algorithms/index.ts";
import { adoptGrant, type DelegateRecord, NEW_DELEGATE } from "../../src/protocol/delegate.ts";
import { directParts, emptyState, keyPeek, type ShareAsk, type ShareGrant } from "../../src/protocol/share.ts";
import { shareRecord } from "../../src/protocol/share_grant.ts";
import { type LimiterRecord, type LimiterRule, peekState, type ShareEntry } from "../../src/protocol/store.ts";
import { delegateSlice } from "../../src/protocol/sublease.ts";
import { LAPSE_GRACE_MS } from "../../src/protocol/tunables.ts";
import { heldRateShare, rateGrantOf } from "../support/held_share.ts";
import { tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
/** 1,000 tokens/s, burst 1,000: a slice of 500 parts refills 0.5 token a ms, burst 500. */
const params = tokenBucket(1000, 1000, 1000);
const rule: LimiterRule = { id: "t", params, version: 1 };
const slice = (parts: number) => sliceParams(params, parts, 1000)!;

/** The key's record: weur.0's 500 parts ended at `endedMs`; the direct slice (500 parts) empty at `endedMs`. */
const record = (endedMs: number): LimiterRecord => {
  const mine: ShareEntry = {
    holder: "weur.0",
    parts: 500,
    units: 0,
    atMs: endedMs - 1000,
    endsAtMs: endedMs,
    prevParts: 0,
    prevEndsAtMs: 0,
    demand: 500,
    askId: "m1",
  };
  return {
    v: 1,
    params,
    fingerprint: JSON.stringify(params),
    state: emptyState(params, endedMs),
    version: 1,
    shares: {
      entries: [mine],
      hotUntilMs: T0 + 5000,
      direct: { parts: 500, state: emptyState(slice(500), endedMs) },
    },
  };
};
/** weur.0's renewal, holding its last grant (m1). */
const ask: ShareAsk = { rule, holder: "weur.0", id: "m2", demand: 500, units: 0, giveBack: [], holding: "m1" };

describe("a rate share's parts after its term, at the key's object", () => {
  it("stay promised within the grace: the renewal of that grant finds them held, the direct slice did not refill them", () => {
    const rec = record(T0 - 100);
    expect(directParts(rec.shares!, T0)).toBe(500);
    // The direct slice's 500 parts refilled 100 ms: 50 tokens, none of the lapsed parts' refill.
    expect(keyPeek(rec, rule, T0).remaining).toBe(50);
    expect(shareRecord(rec, ask, T0).grant).toMatchObject({ kind: "rate", held: 500 });
    // A delegate holding an older grant (the entry's answer lost to it), or not saying: none held (its own may have
    // lapsed before the entry's grant).
    for (const holding of ["m0", undefined]) {
      const { holding: _h, ...bare } = ask;
      const other = holding === undefined ? bare : { ...ask, holding };
      expect(shareRecord(rec, other, T0).grant.held).toBeUndefined();
    }
  });

  it("join the direct slice after the grace: the renewal holds none", () => {
    const rec = record(T0 - LAPSE_GRACE_MS - 100);
    expect(directParts(rec.shares!, T0)).toBe(1000);
    const grant = shareRecord(rec, ask, T0).grant;
    expect(grant.kind).toBe("rate");
    expect(grant.held).toBeUndefined();
  });

  it("a window share holds no parts: no grace (its entry leaves the book at its end)", () => {
    const rec = record(T0 - 100);
    const window = { ...rec.shares!.entries[0]!, parts: 0, units: 10 };
    expect(directParts({ ...rec.shares!, entries: [window] }, T0)).toBe(1000);
  });
});

describe("a delegate adopting a late renewal", () => {
  const half = delegateSlice(params, 500)!;
  /** Its share of 500 parts ended at T0 - 100 ms, its bucket empty at T0 - 200 ms; renewed at T0 - 10 ms. */
  const lapsed: DelegateRecord = {
    ...NEW_DELEGATE,
    share: heldRateShare(rule, 500, emptyState(half, T0 - 200), T0 - 1100, { endsAtMs: T0 - 100 }),
  };
  const grant = (over: Partial<ShareGrant>): ShareGrant => rateGrantOf(rule, 500, T0 - 5, over);
  const level = (g: ShareGrant) => {
    const share = adoptGrant(lapsed, { ...ask, id: "m2" }, g, T0 - 10, T0).share!;
    return peekState(half, share.state!, T0).remaining;
  };

  it("within the grace (its parts held): keeps its refill since the end, 200 ms of 500 parts", () => {
    expect(level(grant({ held: 500 }))).toBe(100);
  });

  it("after the grace (none held): its bucket as at its end, 100 ms of 500 parts, no refill for the lapse", () => {
    // 50: nothing for the parts the grant gave it anew while the answer was on its way (no flight credit).
    expect(level(grant({}))).toBe(50);
  });

  it("part of its parts held: the refill since the end of those only", () => {
    // 50 tokens at its end, and 100 ms of 200 parts since (0.2 a ms): 20.
    expect(level(grant({ held: 200 }))).toBe(70);
  });
});
