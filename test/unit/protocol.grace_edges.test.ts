/**
 * Exact edges of the lapse grace and of a cut rate share (delegate.ts `shareAsk`/`cutFor`, share_grant.ts `inUse` and
 * `rateGrant`'s `held`): the lines aa8fcbf, 5fd0a42 and 6fe93fc changed, each case the behaviour it stands for.
 * Stands for the rate bound's premise that a cut share keeps only its own tokens and that the key's object counts a
 * part as held only while it kept it promised (docs/production.md, "Limits of the bound").
 */
import { describe, expect, it } from "vitest";
import { type DelegateRecord, NEW_DELEGATE, shareAsk } from "../../src/protocol/delegate.ts";
import { emptyState, type ShareAsk } from "../../src/protocol/share.ts";
import { shareRecord } from "../../src/protocol/share_grant.ts";
import { type LimiterRecord, type LimiterRule, peekState, type ShareEntry } from "../../src/protocol/store.ts";
import { delegateSlice } from "../../src/protocol/sublease.ts";
import { DEMAND_BUCKET_MS, LAPSE_GRACE_MS } from "../../src/protocol/tunables.ts";
import { heldRateShare } from "../support/held_share.ts";
import { tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const B0 = T0 / DEMAND_BUCKET_MS;
const params = tokenBucket(1000, 1000, 1000);
const rate: LimiterRule = { id: "t", params, version: 2 };
/** A delegate's slice of 500 parts: 500/s, burst 500. */
const half = delegateSlice(params, 500)!;

describe("a delegate cutting its rate share (delegate.ts shareAsk)", () => {
  /** 500 parts granted for 400 of demand; 50 in the last half term: cut to 152 parts (protocol.delegate.test.ts). */
  const fallen = (over: Parameters<typeof heldRateShare>[4], state = emptyState(half, T0 - 200)): DelegateRecord => ({
    ...NEW_DELEGATE,
    share: heldRateShare(rate, 500, state, T0, { demand: 400, ...over }),
    demand: { bucket: B0, curr: 50, prev: 0 },
  });

  it("keeps its bucket's own tokens in the smaller slice, not a fresh (full) one", () => {
    // Emptied 200 ms ago: 100 tokens, under the 152-part slice's burst (152): all 100 kept.
    const out = shareAsk(fallen({ askId: "a0" }), "weur.0", rate, "a1", T0);
    expect(out.ask).toMatchObject({ keep: 152, holding: "a0" });
    const share = out.record.share!;
    expect(share.parts).toBe(152);
    expect(share.state).not.toBeNull();
    expect(peekState(delegateSlice(params, 152)!, share.state!, T0).remaining).toBe(100);
  });

  it("names no grant it holds when its share kept no ask id (a record from before `askId`): no `holding` field", () => {
    const out = shareAsk(fallen({}), "weur.0", rate, "a1", T0);
    expect(out.ask.keep).toBe(152);
    // The ask is sent and remembered as it is: an absent field, not one written as undefined.
    expect(Object.hasOwn(out.ask, "holding")).toBe(false);
  });
});

describe("the key's object: a renewal of an adopted grant at the end of its grace (share_grant.ts inUse)", () => {
  /** weur.0's last grant (a2): 300 parts until T0 + 900; its grant before, 600 parts, promised until T0 + 2000. */
  const record = (): LimiterRecord => {
    const mine: ShareEntry = {
      holder: "weur.0",
      parts: 300,
      units: 0,
      atMs: T0 - 100,
      endsAtMs: T0 + 900,
      prevParts: 600,
      prevEndsAtMs: T0 + 2000,
      demand: 300,
      askId: "a2",
    };
    const other: ShareEntry = { ...mine, holder: "x", parts: 100, prevParts: 0, prevEndsAtMs: 0, askId: "o1" };
    return {
      v: 1,
      params,
      fingerprint: JSON.stringify(params),
      state: emptyState(params, T0),
      version: 2,
      shares: { entries: [mine, other], hotUntilMs: T0 + 5000 },
    };
  };
  /** weur.0 renews holding a2 (it adopted that grant, so the 600 before it are no longer in use). */
  const ask: ShareAsk = { rule: rate, holder: "weur.0", id: "a3", demand: 300, units: 0, giveBack: [], holding: "a2" };
  const mine = (rec: LimiterRecord | null) => rec?.shares?.entries.find((e) => e.holder === "weur.0");

  it("1 ms before the grace ends: a2's 300 parts are still held, and the grant says so", () => {
    const out = shareRecord(record(), ask, T0 + 900 + LAPSE_GRACE_MS - 1);
    expect(out.grant.held).toBe(300);
    expect(mine(out.record)?.prevParts).toBe(300);
  });

  it("in the very ms the grace ends (the entry kept by the older grant's longer promise): none held, no `held` field", () => {
    const out = shareRecord(record(), ask, T0 + 900 + LAPSE_GRACE_MS);
    // The grant carries no `held`: a field written as 0 would be sent and stored for nothing.
    expect(Object.hasOwn(out.grant, "held")).toBe(false);
    expect(mine(out.record)?.prevParts).toBe(0);
  });
});
