/**
 * Tokens moved with parts (src/protocol/share_tokens.ts): what the key's object takes of a cut share's tokens
 * (`ShareAsk.tokens`). Stands for the rate bound's premise that tokens are moved, never made: at most the burst of the
 * parts the cut frees, capped at the direct slice's own burst, nothing for an invalid count.
 */
import { describe, expect, it } from "vitest";
import { sliceParams } from "../../src/algorithms/index.ts";
import { emptyState, fullState } from "../../src/protocol/share.ts";
import { creditCut } from "../../src/protocol/share_tokens.ts";
import { type LimiterRecord, type LimiterRule, peekState, type ShareEntry } from "../../src/protocol/store.ts";
import { tokenBucket } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const params = tokenBucket(1000, 1000, 1000);
const rule: LimiterRule = { id: "t", params, version: 1 };
const slice = (parts: number) => sliceParams(params, parts, 1000)!;
const mine: ShareEntry = {
  holder: "weur.0",
  parts: 500,
  units: 0,
  atMs: T0 - 100,
  endsAtMs: T0 + 900,
  prevParts: 0,
  prevEndsAtMs: 0,
  demand: 500,
  askId: "m1",
};
/** The key's record with 500 parts out to `mine` and a direct slice of 500 parts, empty or full. */
const record = (full: boolean): LimiterRecord => ({
  v: 1,
  params,
  fingerprint: JSON.stringify(params),
  state: fullState(params, T0),
  version: 1,
  shares: {
    entries: [mine],
    hotUntilMs: T0 + 5000,
    direct: { parts: 500, state: full ? fullState(slice(500), T0) : emptyState(slice(500), T0) },
  },
});
const direct = (rec: LimiterRecord | null) => {
  const d = rec?.shares?.direct;
  return { parts: d?.parts, tokens: d?.state == null ? 0 : peekState(slice(d.parts), d.state, T0).remaining };
};

describe("a cut share's tokens at the key's object", () => {
  it("go into the direct slice, which the freed parts join", () => {
    // mine promised 500 parts and uses 200 after the cut: 300 parts (300 tokens of burst) join the direct slice.
    expect(direct(creditCut(record(false), rule, 250, mine, 200, [], T0))).toEqual({ parts: 800, tokens: 250 });
  });

  it("never more than the freed parts' burst", () => {
    expect(direct(creditCut(record(false), rule, 400, mine, 200, [], T0))).toEqual({ parts: 800, tokens: 300 });
  });

  it("capped at the direct slice's burst: a full one takes none", () => {
    // 500 of 500 tokens in the direct slice; converted to 800 parts it holds 500, and takes the 300 (800: full).
    expect(direct(creditCut(record(true), rule, 300, mine, 200, [], T0))).toEqual({ parts: 800, tokens: 800 });
    const others: ShareEntry[] = [{ ...mine, holder: "enam.0", askId: "o1", parts: 300 }];
    // Another holder's 300 parts: the direct slice stays at 500 parts, full already: the 300 tokens are lost.
    expect(direct(creditCut(record(true), rule, 300, mine, 200, others, T0))).toEqual({ parts: 500, tokens: 500 });
  });

  it("nothing for an invalid count, a cut that frees nothing, or no direct slice", () => {
    const rec = record(false);
    for (const asked of [undefined, 0, -5, 2.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(creditCut(rec, rule, asked, mine, 200, [], T0)).toBe(rec);
    }
    expect(creditCut(rec, rule, 100, mine, 500, [], T0)).toBe(rec);
    const { shares: _s, ...bare } = rec;
    expect(creditCut(bare, rule, 100, mine, 200, [], T0)).toBe(bare);
  });
});
