/**
 * Exact edges of a delegate's asks and answers (delegate.ts `shareAsk`'s `pending`, `delegateCall`'s `leaseWaitMs`),
 * each case the behaviour it stands for: only a window share's grant is charged, so only a window ask is remembered to
 * resend as it was (a lost rate ask is asked anew with the demand as it is then); an isolate is told to wait only when
 * its sub-lease ask found the slice empty.
 */
import { describe, expect, it } from "vitest";
import {
  type DelegateRecord,
  delegateCall,
  type HeldShare,
  NEW_DELEGATE,
  shareAsk,
} from "../../src/protocol/delegate.ts";
import { emptyState } from "../../src/protocol/share.ts";
import type { LimiterRule } from "../../src/protocol/store.ts";
import { delegateSlice } from "../../src/protocol/sublease.ts";
import { heldRateShare, heldWindowShare } from "../support/held_share.ts";
import { fixedWindow, tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const win: LimiterRule = { id: "w", params: fixedWindow(100, 60_000), version: 2 };
const rate: LimiterRule = { id: "t", params: tokenBucket(1000, 1000, 1000), version: 2 };
const half = delegateSlice(rate.params, 500)!;
const windowShare = heldWindowShare(win, T0);
const withShare = (share: HeldShare | null): DelegateRecord => ({ ...NEW_DELEGATE, share });

describe("which asks a delegate remembers to resend (`pending`)", () => {
  it("a window ask: charged at the key's object, so remembered and resent as it was", () => {
    const out = shareAsk(withShare(windowShare), "weur.0", win, "a1", T0);
    expect(out.record.pending).toEqual({ ask: out.ask, sentAtMs: T0 });
  });

  it("a window share let go: nothing charged, nothing remembered", () => {
    expect(shareAsk(withShare(windowShare), "weur.0", win, "a1", T0, true).record.pending).toBeUndefined();
  });

  it("a rate ask, renewing or first: its grant charges nothing; a lost one is asked anew, not resent", () => {
    const held = withShare(heldRateShare(rate, 500, emptyState(half, T0), T0 - 800));
    expect(shareAsk(held, "weur.0", rate, "a1", T0).record.pending).toBeUndefined();
    expect(shareAsk(withShare(null), "weur.0", rate, "a1", T0).record.pending).toBeUndefined();
  });
});

describe("when an isolate is told to wait for a sub-lease (`leaseWaitMs`)", () => {
  it("a batch that asked for none is not told to wait: no field", () => {
    const out = delegateCall(
      withShare(heldRateShare(rate, 500, emptyState(half, T0 - 100), T0)),
      { rule: rate, id: "b1", costs: [1] },
      T0,
    );
    expect(out.result.results).toHaveLength(1);
    expect(Object.hasOwn(out.result, "leaseWaitMs")).toBe(false);
  });
});
