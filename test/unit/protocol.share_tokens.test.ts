/**
 * A rate share's tokens at a delegate (src/protocol/share_tokens.ts): the bucket an adopted grant starts from
 * (`adoptedStart`, `carried`) and the refill of parts the key's object kept promised after a share's end (`refill`).
 * Stands for the rate bound's premise that one side refills a part at a time: a renewal keeps its bucket's own tokens
 * (a part of a token too, while its parts stayed promised) and never counts a refill the key's object gave to others.
 * 1,000 tokens/s, burst 1,000: a slice of 500 parts refills 0.5 token a ms.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AlgorithmParams, type AlgorithmState, refund, sliceParams } from "../../src/algorithms/index.ts";
import { emptyState, type ShareGrant } from "../../src/protocol/share.ts";
import { adoptedStart, carried, refill } from "../../src/protocol/share_tokens.ts";
import { fullState, peekState } from "../../src/protocol/store.ts";
import { fixedWindow, gcraP, tokenBucket } from "../support/params.ts";
import { runs } from "../support/runs.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const params = tokenBucket(1000, 1000, 1000);
const slice = (parts: number) => sliceParams(params, parts, 1000)!;
const half = slice(500);
const level = (p: AlgorithmParams, state: AlgorithmState, atMs: number) => peekState(p, state, atMs).remaining;

describe("refill: the refill of parts kept promised after a share's end", () => {
  const cases: [string, AlgorithmParams, number, number, number][] = [
    // 200 parts of 1,000 tokens/s for 100 ms: 20 tokens.
    ["200 parts, 100 ms", params, 200, 100, 20],
    // 200 parts for 104 ms: 20.8 tokens, 20 whole ones.
    ["whole tokens only", params, 200, 104, 20],
    // 500 parts for 10 s would be 5,000 tokens: at most their slice's burst, 500.
    ["at most a burst", params, 500, 10_000, 500],
    // One part (a thousandth of the rate) for 999 ms: 0.999 of a token, none whole.
    ["one part, under a token", params, 1, 999, 0],
    ["one part, a token", params, 1, 1000, 1],
    // No parts held, or no time since the end: nothing.
    ["no parts", params, 0, 100, 0],
    ["no time", params, 500, 0, 0],
    // Read before the span's start (an end later than now): nothing, not a negative refill.
    ["a negative span", params, 500, -100, 0],
    ["negative parts", params, -5, 100, 0],
    // A window rule has no rate slice: nothing refills.
    ["a window rule", fixedWindow(100, 1000), 500, 100, 0],
  ];
  it.each(cases)("%s", (_name, p, parts, ms, want) => {
    expect(refill(p, parts, ms, T0)).toBe(want);
  });

  it("is the parts' share of the rate over the span, whole tokens, at most their burst (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 5000 }), (parts, ms) => {
        // The slice of `parts` refills parts/1,000 of a token a ms, with a burst of `parts` tokens.
        expect(refill(params, parts, ms, T0)).toBe(Math.min(parts, Math.floor((parts * ms) / 1000)));
      }),
      { numRuns: runs(200) },
    );
  });
});

describe("carried: an ended share's bucket under a new grant", () => {
  type Case = [
    string,
    AlgorithmParams,
    AlgorithmParams | null,
    AlgorithmState | null,
    number,
    { level: number; afterEnd: number },
  ];
  const cases: Case[] = [
    // Emptied 100 ms before its end (50 tokens), ended 200 ms ago, none of its parts held since: 50, nothing after.
    ["at its end", half, half, emptyState(half, T0 - 300), 0, { level: 50, afterEnd: 0 }],
    // The same with 200 parts held since the end: their refill over 200 ms, 40, is the delegate's own.
    ["held parts' refill", half, half, emptyState(half, T0 - 300), 200, { level: 50, afterEnd: 40 }],
    // One token left at its end (emptied 2 ms before it): that token carries.
    ["one token", half, half, emptyState(half, T0 - 202), 0, { level: 1, afterEnd: 0 }],
    // 1.5 tokens at its end: the whole one carries.
    ["a token and a half", half, half, emptyState(half, T0 - 203), 0, { level: 1, afterEnd: 0 }],
    // A full 800-part bucket under a 500-part grant: capped at the new burst.
    ["capped at the new burst", half, slice(800), fullState(slice(800), T0 - 300), 0, { level: 500, afterEnd: 0 }],
    // An old share holding no bucket (its slice was not adoptable): an empty start, not a full one.
    ["no old bucket", half, half, null, 0, { level: 0, afterEnd: 0 }],
    // No old slice named and no bucket (a share with no slice has none): an empty start, nothing read from it.
    ["no old slice", half, null, null, 0, { level: 0, afterEnd: 0 }],
    // The rules changed algorithm between the grants (gcra to token_bucket): nothing carries (carryOver's rule).
    [
      "another algorithm",
      half,
      gcraP(500, 1000, 500),
      fullState(gcraP(500, 1000, 500), T0 - 300),
      0,
      { level: 0, afterEnd: 0 },
    ],
  ];
  it.each(cases)("%s", (_name, next, from, state, held, want) => {
    const out = carried(params, next, from, state, T0 - 200, held, T0);
    expect({ level: level(next, out.state, T0), afterEnd: out.afterEnd }).toEqual(want);
  });
});

describe("adoptedStart: the bucket a delegate's adopted rate grant starts from", () => {
  const grant = (parts: number, held?: number): ShareGrant => ({
    atMs: T0 - 5,
    kind: "rate",
    parts,
    units: 0,
    remaining: 0,
    termMs: 1000,
    rule: { id: "t", params, version: 1 },
    hot: true,
    ...(held === undefined ? {} : { held }),
  });
  type Old = { parts: number; endsAtMs: number; state: AlgorithmState | null } | null;
  /** `at`: when the level is read (a part of a token shows 1 ms later). */
  type Case = [string, ShareGrant, AlgorithmParams | null, Old, { at: number; level: number; afterEnd: number }];
  const cases: Case[] = [
    // A first grant (no old share): an empty bucket.
    ["a first grant", grant(500), null, null, { at: T0, level: 0, afterEnd: 0 }],
    // No old share, whatever slice is named (the caller names none then): an empty bucket.
    ["no old share, a slice named", grant(500), half, null, { at: T0, level: 0, afterEnd: 0 }],
    // A live share renewed: its bucket carried exactly, its half token included (emptied 1 ms ago: 0.5, 1 ms on: 1).
    [
      "a live share, a part of a token",
      grant(500),
      half,
      { parts: 500, endsAtMs: T0 + 500, state: emptyState(half, T0 - 1) },
      { at: T0 + 1, level: 1, afterEnd: 0 },
    ],
    // Adopted in the very ms the old share ends: still the live share's bucket, its part of a token included.
    [
      "the ms it ends",
      grant(500),
      half,
      { parts: 500, endsAtMs: T0, state: emptyState(half, T0 - 1) },
      { at: T0 + 1, level: 1, afterEnd: 0 },
    ],
    // Renewed 1 ms after its end within the grace, all 500 parts held: as if it never ended (0.5 token at the end, 0.5
    // since: 1 whole token); counted apart (at its end, then since), each half would round down to 0.
    [
      "all held after the end",
      grant(500, 500),
      half,
      { parts: 500, endsAtMs: T0 - 1, state: emptyState(half, T0 - 2) },
      { at: T0, level: 1, afterEnd: 0 },
    ],
    // Renewed 100 ms after its end with none held (after the grace): its bucket at its end (50), no refill since.
    [
      "after the grace",
      grant(500),
      half,
      { parts: 500, endsAtMs: T0 - 100, state: emptyState(half, T0 - 200) },
      { at: T0, level: 50, afterEnd: 0 },
    ],
    // 200 of its 500 parts held: 50 at its end and the refill of those 200 over 100 ms, 20.
    [
      "part held",
      grant(500, 200),
      half,
      { parts: 500, endsAtMs: T0 - 100, state: emptyState(half, T0 - 200) },
      { at: T0, level: 50, afterEnd: 20 },
    ],
    // A smaller renewal (300 parts) says 500 held: at most the new grant's 300 are its own (30 in 100 ms).
    [
      "held at most the grant's parts",
      grant(300, 500),
      half,
      { parts: 500, endsAtMs: T0 - 100, state: emptyState(half, T0 - 200) },
      { at: T0, level: 50, afterEnd: 30 },
    ],
    // 400 of a full 500-part bucket's parts held 400 ms, a 900-part grant: those parts were full at the end and gain
    // nothing (500, what the bucket would hold had it never ended; counting their 160 made tokens).
    [
      "held parts full at the end",
      grant(900, 400),
      half,
      { parts: 500, endsAtMs: T0 - 400, state: fullState(half, T0 - 1400) },
      { at: T0, level: 500, afterEnd: 0 },
    ],
    // The same bucket at 400 at its end: 100 more fit (500 had it never ended), not the held parts' whole 160.
    [
      "held parts nearly full",
      grant(900, 400),
      half,
      { parts: 500, endsAtMs: T0 - 400, state: emptyState(half, T0 - 1200) },
      { at: T0, level: 400, afterEnd: 100 },
    ],
    // At 300 at its end: the held parts' 160 fit (200 more had it never ended).
    [
      "held parts with room",
      grant(900, 400),
      half,
      { parts: 500, endsAtMs: T0 - 400, state: emptyState(half, T0 - 1000) },
      { at: T0, level: 300, afterEnd: 160 },
    ],
    // A window share before a rate grant (the rules changed kind): no slice, no bucket: an empty start.
    [
      "after a window share",
      grant(500),
      null,
      { parts: 0, endsAtMs: T0 + 500, state: null },
      { at: T0, level: 0, afterEnd: 0 },
    ],
    // A live old bucket but no slice named (the caller names one whenever there is a bucket; not relied on): an empty
    // start, the bucket not read under parameters it was not made for.
    [
      "a bucket without a slice",
      grant(500),
      null,
      { parts: 500, endsAtMs: T0 + 500, state: fullState(half, T0 - 100) },
      { at: T0, level: 0, afterEnd: 0 },
    ],
    // A live old share holding no bucket (the caller has one whenever it has a slice; not relied on): an empty start.
    [
      "a live share without a bucket",
      grant(500),
      half,
      { parts: 500, endsAtMs: T0 + 500, state: null },
      { at: T0, level: 0, afterEnd: 0 },
    ],
  ];
  it.each(cases)("%s", (_name, g, from, old, want) => {
    const out = adoptedStart(g, slice(g.parts), from, old, T0);
    expect({ at: want.at, level: level(slice(g.parts), out.state, want.at), afterEnd: out.afterEnd }).toEqual(want);
  });

  it("never makes tokens, never loses the bucket's own (property)", () => {
    // An old share of `oldParts`, emptied `emptiedMs` before its end, ended `lapseMs` before the renewal (0 or less:
    // live), renewed with `newParts`, `held` of them said held. The delegate's bucket after adopting (its start and
    // the refill counted after the end, as delegate.ts `adoptGrant` adds them) holds at most what the old bucket would
    // have had it never ended, and at least what it held at its end, each capped at the new burst.
    // (It found tokens made where some but not all parts were held and the grant was larger: the held parts' refill was
    // added where they were full at the end; the "held parts full at the end" cases above.)
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 0, max: 1000 }),
        fc.integer({ min: 0, max: 3000 }),
        fc.integer({ min: -500, max: 1500 }),
        (oldParts, newParts, heldParts, emptiedMs, lapseMs) => {
          const from = slice(oldParts);
          const next = slice(newParts);
          const endsAtMs = T0 - lapseMs;
          const state = emptyState(from, endsAtMs - emptiedMs);
          const out = adoptedStart(grant(newParts, heldParts), next, from, { parts: oldParts, endsAtMs, state }, T0);
          const got = level(next, refund(next, out.state, out.afterEnd, T0), T0);
          const cap = newParts; // the new slice's burst
          expect(got).toBeLessThanOrEqual(Math.min(cap, level(from, state, T0)));
          expect(got).toBeGreaterThanOrEqual(Math.min(cap, level(from, state, Math.min(T0, endsAtMs))));
        },
      ),
      { numRuns: runs(200) },
    );
  });
});
