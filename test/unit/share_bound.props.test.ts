/**
 * The share bound, with traffic driven TO it (issue 18). Several isolates (the real coalescer, src/isolate) on
 * simulated links ask one simulated object (src/sim/object.ts over store.ts `callRecord`); whatever the timing, a
 * window rule never admits more than `limit` in a window, and a rate rule never more than `burst + rate × (t + ttl)`
 * in any span `t` (each algorithm's `lease` entry).
 *
 * Unlike a property that samples arrivals at random, these generators push each case to its bound:
 * - arrivals paced at 1×, 2×, 4× and 10× the rule's own rate (a key at and above its limit);
 * - bursts at term ends: a step that jumps to just before (or just after) an isolate's lease ends, so a burst from
 *   that isolate (and one from another) lands where a term counted too long would show;
 * - refunds after a term's end (another rule's denial arriving later than the lease that admitted the request);
 * - isolate clocks stepping back by 100-500 ms (more than any round trip here; see "known limits" for smaller steps).
 * A check that the generators reach the bound (most cases come within 10% of it) keeps them honest.
 *
 * Three deliberate faults must fail the property, each as a pinned case and by the property finding it on its own:
 * (a) a lease term counted from the answer's receipt instead of the call's send;
 * (b) a unit given back after its lease's end counted twice by the object;
 * (c) a rate lease usable for 3 × its ttl.
 * Each is a small wrong copy at the protocol's boundary (the grant an isolate receives, the record operation the
 * object runs), so the isolate and object code under test stay the real ones.
 *
 * Three gaps the property found are fixed and pinned as plain cases (each fix has a table test of its own too): a
 * leader's lease answer let through only when the call for the requests behind it returned, after its term
 * (lease_timing.test.ts); a clock step back while a call is in flight stretching the lease it brings (same file); a
 * rate rule's late refund giving back what the refill cap absorbed (late_refund.test.ts). What is left is pinned as
 * a known limit (`it.fails`): a step back no larger than the call's round trip cannot be told from a fast call.
 * A pinned case fills idle delegates' buckets and spends them at once, with sub-leases held to their term's end (the
 * generators never leave a live share idle). Through the tier the rate bound is the stated one (issue 36):
 * `burst + rate × (t + RATE_BOUND_MS)`, 500 ms, nothing per share, for rates from 10/s to 5,000/s and bursts from 1 to
 * twice the rate (tier_sim.ts): over 10 s at or above the limit, at most 5% beyond the exact single writer.
 * The random property runs from a fixed seed (repeatable in CI; 18,000 runs of other seeds found nothing else).
 *
 * Times: an admission counts at the simulated (true) time it was let through: the object's apply time for a decision
 * the object made, the isolate's answer time for a request admitted from a lease.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { AlgorithmParams } from "../../src/rules/types.ts";
import { fixedWindow, tokenBucket } from "../support/params.ts";
import { runs } from "../support/runs.ts";
import { type Case, caseArb, type Fault, measure, type Refund, type Step, simulate } from "../support/share_sim.ts";
import {
  type LateCounts,
  overTenSeconds,
  simulateTier,
  type TierCase,
  type TierStep,
  tierCaseArb,
  tierViolation,
} from "../support/tier_sim.ts";

const arrive = (dtMs: number, isolate: number, refund: Refund = "none"): Step => ({
  kind: "arrive",
  dtMs,
  isolate,
  refund,
});
const burst = (isolate: number, n: number): Step => ({ kind: "burst", isolate, n, refund: "none" });
const violationOf = async (c: Case, fault: Fault = "none") => {
  const { admitted } = await simulate(c, fault);
  return measure(c.params, c.lease.ttlMs, admitted).violation;
};

/**
 * Under mutation testing (vitest.mutation.config.ts) the fault finders are skipped: they test the generators, not
 * src/, and with a fifth of their cases a finder that misses its fault would count as a mutant killed.
 */
const MUTATION = (process.env.SLUICE_FC_RUNS_DIVISOR ?? "1") !== "1";

/** Runs of the late-returns property (about 30-90 ms each). */
const LATE_RUNS = 60;

/** The bound holds (clock steps of 100-500 ms, refunds of every rule, at once and a term late). */
const property = (pressures: number[]) =>
  fc.asyncProperty(caseArb(), async (c) => {
    const { admitted } = await simulate(c);
    const { pressure, violation } = measure(c.params, c.lease.ttlMs, admitted);
    pressures.push(pressure);
    expect(violation).toBeNull();
  });

/** With the fault, no case breaks the bound that the real code keeps (the property a fault must fail). */
const faultProperty = (fault: Fault) =>
  fc.asyncProperty(caseArb({ rate: fault === "rate lease for 3 ttl" }), async (c) => {
    const faulty = await violationOf(c, fault);
    if (faulty !== null) expect(await violationOf(c)).not.toBeNull();
  });

describe("the share bound, with traffic driven to it", () => {
  it("window: never more than limit per window; rate: never more than burst + rate × (t + ttl) (property)", async () => {
    const pressures: number[] = [];
    await fc.assert(property(pressures), { numRuns: runs(150), seed: 1 });
    // The generators reach the bound: most cases are at their key's limit (a property far below its bound proves
    // nothing, the old lease property's fault: 1.6% of it at most), and some go past an exact writer's, into the
    // slack the lease bound allows.
    const atLimit = pressures.filter((p) => p >= 0.9).length;
    expect(atLimit / pressures.length).toBeGreaterThan(0.5);
    expect(Math.max(...pressures)).toBeGreaterThanOrEqual(1);
  });

  // Each fault is found by the generators on their own (from a fixed seed, so that this is repeatable), not only by
  // its pin: a case the real code keeps within the bound and the faulty copy does not.
  for (const fault of ["term from receipt", "late return counted twice", "rate lease for 3 ttl"] as const) {
    it.skipIf(MUTATION)(`finds the fault "${fault}" on its own`, async () => {
      const out = await fc.check(faultProperty(fault), { numRuns: 300, seed: 1, endOnFailure: true });
      expect(out.failed).toBe(true);
    });
  }
});

describe("the share bound through the delegate tier", () => {
  it("delegates' rate and window shares keep the bound: load at 1-10x, bursts at term ends, restarts, late refunds, sub-leases (property)", async () => {
    let shared = 0;
    let subleased = 0;
    let admitted = 0;
    await fc.assert(
      fc.asyncProperty(tierCaseArb(), async (c) => {
        const out = await simulateTier(c);
        shared += out.shared;
        subleased += out.subleased;
        admitted += out.admitted.length;
        expect(tierViolation(c, out.admitted, out.bumpedAtMs)).toBeNull();
        // Issue 36's bound in its own terms: any 10 s at most 5% beyond what the exact writer admits in 10 s.
        expect(overTenSeconds(c, out.admitted) ?? 0).toBeLessThanOrEqual(0.05);
      }),
      { numRuns: runs(40), seed: 1 },
    );
    // The property is about shares: the key went hot and delegates held shares in the runs; and about the sub-leases
    // delegates grant their callers (sublease.ts): dozens of admissions per run came from them.
    expect(shared).toBeGreaterThan(40);
    expect(subleased).toBeGreaterThan(20 * runs(40));
    expect(subleased).toBeLessThan(admitted);
  });

  it("demand moving from one delegate to the others keeps the bound: shares cut, their parts moved (property)", async () => {
    // The first half of each case's batches go to one delegate, the second half mostly to the others: that delegate's
    // demand falls, it cuts its rate share (`keep`), and the parts it gives up go to the direct slice and on to the
    // others with their grants (with their proportion of the direct slice's tokens). Moved, never made: the bound holds
    // with every cut and move.
    let cuts = 0;
    await fc.assert(
      fc.asyncProperty(tierCaseArb({ moving: true }), async (c) => {
        const out = await simulateTier(c);
        cuts += out.cuts;
        expect(tierViolation(c, out.admitted, out.bumpedAtMs)).toBeNull();
        expect(overTenSeconds(c, out.admitted) ?? 0).toBeLessThanOrEqual(0.05);
      }),
      { numRuns: runs(40), seed: 2 },
    );
    // The runs cut shares (a property about cuts that saw none would prove nothing about them): 11 cuts in the 40 runs
    // of this seed (half the cases are window rules, which cut nothing; a short case renews few times).
    expect(cuts).toBeGreaterThan(runs(40) / 8);
  });

  it("several callers per delegate holding sub-leases and giving them back late keep the bound (property)", async () => {
    // tier_sim.ts late mode: 2-4 callers (isolates) per delegate, each holding its own sub-lease across its calls and
    // giving what is left back late (with a later batch or alone, past its term, past the share's renewal), some
    // returns lost, some calls delivered twice; quiet spells refill slices to full and one caller drains them. This
    // is the order that broke the bound before the sub-lease returns were cut (0ef22d2) and reserved (9772afd). On
    // the code before them (667defa's src/, this file's tier_sim.ts) this property fails at its 20th run; shrunk:
    // token_bucket 149/s, burst 174, one delegate, 3 callers. After 618 ms with no load, caller 1 takes a sub-lease
    // (asked 174); 1,588 ms of one request every 19 ms keep the share renewed while the slice refills to full; then
    // callers 0, 2 and 1 send 83 requests each at once: 0 and 2 drain the slice, and caller 1's unused units, given
    // back with its batch (after its term, into a renewed share), are taken in again and admitted. 249 admitted within
    // 3 ms > 248 (174 + 149 × 0.503 s). Today's code admits 174 in those 3 ms (0ef22d2's: 171).
    const seen: LateCounts = { sent: 0, afterTerm: 0, afterRenewal: 0, twice: 0, lost: 0 };
    await fc.assert(
      fc.asyncProperty(tierCaseArb({ late: true }), async (c) => {
        const out = await simulateTier(c);
        for (const k of Object.keys(seen) as (keyof LateCounts)[]) seen[k] += out.late[k];
        expect(tierViolation(c, out.admitted, out.bumpedAtMs)).toBeNull();
        expect(overTenSeconds(c, out.admitted) ?? 0).toBeLessThanOrEqual(0.05);
      }),
      { numRuns: runs(LATE_RUNS), seed: 1 },
    );
    // The runs reach what the mode is for: returns after their term, into a renewed share, calls delivered twice,
    // returns lost.
    expect(seen.afterTerm).toBeGreaterThan(0);
    expect(seen.afterRenewal).toBeGreaterThan(0);
    expect(seen.twice).toBeGreaterThan(0);
    expect(seen.lost).toBeGreaterThan(0);
    // 9 s on an idle 2-core machine; 60 s (the default) ran out at load 10 with nothing failing: a CPU budget, not a
    // timed assertion.
  }, 180_000);

  it.skipIf(MUTATION)("finds a sub-lease used for 3 × its term on its own", async () => {
    const out = await fc.check(
      fc.asyncProperty(tierCaseArb(), async (c) => {
        const { admitted, bumpedAtMs } = await simulateTier(c, "sublease for 3 terms");
        expect(tierViolation(c, admitted, bumpedAtMs)).toBeNull();
      }),
      { numRuns: 100, seed: 1, endOnFailure: true },
    );
    expect(out.failed).toBe(true);
  });

  it.skipIf(MUTATION)("finds a share used for 3 × its term on its own", async () => {
    const out = await fc.check(
      fc.asyncProperty(tierCaseArb(), async (c) => {
        const { admitted, bumpedAtMs } = await simulateTier(c, "share for 3 terms");
        expect(tierViolation(c, admitted, bumpedAtMs)).toBeNull();
      }),
      { numRuns: 100, seed: 1, endOnFailure: true },
    );
    expect(out.failed).toBe(true);
  });
});

describe("the three faults, pinned: each breaks the bound, the real code does not", () => {
  it("(a) a term counted from the receipt outlives its window", async () => {
    // 10 per 1 s window, ending at T0 + 2000. Isolate 0 (40 ms away) leases 2 units near the end: its term is cut at
    // the window's end counted from the send; counted from the receipt it reaches 40 ms into the next window, where
    // isolate 1 takes the whole new limit: 12 in a 10-per-window window.
    const c: Case = {
      params: fixedWindow(10, 1000),
      lease: { ttlMs: 1000, units: 2, above: null },
      oneWayMs: [40, 1],
      steps: [arrive(1850, 0), { kind: "term end", isolate: 0, offsetMs: -2 }, burst(0, 2), burst(1, 10)],
    };
    expect(await violationOf(c)).toBeNull();
    expect(await violationOf(c, "term from receipt")).toMatch(/: 12 admitted > limit 10$/);
  });

  it("(b) a refund after its lease's end counted twice", async () => {
    // 10 per 2 s window. Isolate 0 leases 2 units and admits 2 requests from them, which another rule refunds a term
    // later: counted twice, the window admits 11.
    const c: Case = {
      params: fixedWindow(10, 2000),
      lease: { ttlMs: 300, units: 2, above: null },
      oneWayMs: [5, 5],
      steps: [arrive(10, 0), arrive(1, 0, "after term"), arrive(1, 0, "after term"), arrive(900, 1), burst(1, 20)],
    };
    expect(await violationOf(c)).toBeNull();
    expect(await violationOf(c, "late return counted twice")).toMatch(/: 11 admitted > limit 10$/);
  });

  it("(c) a rate lease usable for 3 × ttl", async () => {
    // 10/s, burst 30, ttl 1 s: at most 30 + 10 × (t + 1 s). Isolate 0 leases 12 units and falls idle; at its term's
    // end (3 s later with the fault) the bucket is full again for isolate 1, and isolate 0 spends its stale units.
    const c: Case = {
      params: tokenBucket(10, 1000, 30),
      lease: { ttlMs: 1000, units: 12, above: null },
      oneWayMs: [5, 5],
      steps: [arrive(0, 0), { kind: "term end", isolate: 0, offsetMs: -3 }, burst(0, 12), burst(1, 40)],
    };
    expect(await violationOf(c)).toBeNull();
    expect(await violationOf(c, "rate lease for 3 ttl")).toMatch(/^41 admitted within \d+ ms > 40$/);
  });
});

describe("idle delegate buckets, pinned: filled to their burst and spent at once", () => {
  it("sub-leases held to their term's end and full buckets, spent at once, keep burst + rate × (t + 500 ms)", async () => {
    // The tier property's load stays at or above the rate while shares live, so no delegate's bucket is ever full.
    // Here: 100/s, burst 20, four delegates. 2 s at 2x the rate makes the key hot; 10 s at 55/s (above the key's cold
    // mark, below its rate) keeps every share alive while each delegate's bucket (about 250 parts: 25/s, burst 5)
    // fills. Then each delegate's caller takes a sub-lease and holds it 470 ms (its term is RATE_LEASE_TERM_MS, 480 ms)
    // while its bucket refills; then every caller spends its sub-lease and a batch of 200 through its delegate, and a
    // direct caller 60, all at once. Bound: 20 + 100 × (t + 500 ms), nothing per share. (With the old terms, 500 ms
    // sub-leases and 200 ms of extra slice burst, the bound this case was held to was 20 + 100 × (t + 1 s) + 4.)
    const batch = (dtMs: number, to: number, n: number, lease = 0): TierStep => ({
      kind: "batch",
      dtMs,
      to,
      n,
      refund: 0,
      lease,
    });
    const steps: TierStep[] = [];
    for (let k = 0; k < 400; k++) steps.push(batch(5, k % 4, 1));
    for (let k = 0; k < 550; k++) steps.push(batch(18, k % 4, 1));
    for (let d = 0; d < 4; d++) steps.push(batch(d === 0 ? 18 : 0, d, 1, 16));
    for (let d = 0; d < 4; d++) steps.push(batch(d === 0 ? 470 : 0, d, 200));
    steps.push(batch(0, -1, 60));
    const c: TierCase = {
      params: tokenBucket(100, 1000, 20),
      lowered: tokenBucket(100, 1000, 20),
      hopMs: [5, 5, 5, 5],
      steps,
    };
    const { admitted, bumpedAtMs } = await simulateTier(c);
    expect(tierViolation(c, admitted, bumpedAtMs)).toBeNull();
    const last = Math.max(...admitted);
    // The case reaches what it is about: sub-leases held to their term's end and buckets refilled meanwhile, spent
    // together (with 480 ms sub-leases and no extra burst, 13 of the delegates' 20 units of burst within 12 ms).
    expect(admitted.filter((at) => at > last - 12).length).toBeGreaterThan(10);
  });
});

// Gaps in the lease protocol that the property found (reported in /work/team/proof-needs.md), fixed: each case broke
// the bound before its fix.
describe("gaps found by the property, fixed", () => {
  it("a leader answered from the lease is let through only when the call for the rest returns", async () => {
    // 10 per 1 s window, ending at T0 + 2000. Isolate 0 (40 ms away) gets a lease of 2 at 1900; four requests queued
    // meanwhile: the first leads the next call and is answered from the lease, but let through only when that call
    // returns (2022), in the next window, where isolate 1 takes the whole new limit.
    const c: Case = {
      params: fixedWindow(10, 1000),
      lease: { ttlMs: 1000, units: 2, above: null },
      oneWayMs: [40, 1],
      steps: [arrive(1860, 0), arrive(1, 0), arrive(1, 0), arrive(1, 0), arrive(1, 0), arrive(166, 1), burst(1, 10)],
    };
    expect(await violationOf(c)).toBeNull();
  });

  it("a newer rules version seen only in a share ask that grants nothing is not forgotten", async () => {
    // 100 per 1 s window (v1), 90 (v2). Direct v1 callers take 96; then a delegate asks under v2 and gets nothing (the
    // window is spent under v2), so the record stays on v1; in the next window the v1 callers take 100 again, where
    // the newest version allows 90. (Found by the tier property with version bumps.)
    const batch = (dtMs: number, to: number, n: number): TierStep => ({ kind: "batch", dtMs, to, n, refund: 0 });
    const c: TierCase = {
      params: fixedWindow(100, 1000),
      lowered: fixedWindow(90, 1000),
      hopMs: [5, 5],
      steps: [
        batch(10, -1, 8),
        ...Array.from({ length: 11 }, () => batch(2, -1, 8)),
        { kind: "bump" },
        batch(5, 0, 1),
        batch(1000, -1, 8),
        ...Array.from({ length: 12 }, () => batch(2, -1, 8)),
      ],
    };
    const { admitted, bumpedAtMs } = await simulateTier(c);
    expect(tierViolation(c, admitted, bumpedAtMs)).toBeNull();
  });

  it("an isolate clock stepping back while a call is in flight stretches the lease it brings", async () => {
    // Found by the property with clock steps (shrunk): a window unit used past its window's end.
    expect(await violationOf(STEP_BACK as Case)).toBeNull();
  });

  it("a rate rule's refund a term late gives back what the refill cap absorbed", async () => {
    // Found by the property (shrunk): gcra 5 per 3 s, burst 5, ttl 300 ms; 6 admitted within 259 ms (bound 5.93).
    const c = LATE_REFUND as Case;
    expect(await violationOf(c)).toBeNull();
  });
});

// A limit, not a gap to fix here: `it.fails` passes while it holds (docs/rules.md states it).
describe("known limits, pinned", () => {
  it.fails("a step back larger than the call's way out but within its round trip stretches the lease it brings", async () => {
    // 16 per 500 ms window. Isolate 0 (26 ms away) sends a call with a lease ask; its clock steps back 29 ms while the
    // call is in flight. The answer comes 53 ms later, 24 ms by its clock: nothing says the clock stepped (it still
    // reads later than at the send), so the term, counted from the send, ends 2 ms after the object's, in the next
    // window. workerd has no clock that never steps (performance.now() is Date.now() there), so only a step larger
    // than the round trip is seen (the clock reads earlier than at the send: coalesce.ts `adopt`).
    const c: Case = {
      params: fixedWindow(16, 500),
      lease: { ttlMs: 2500, units: null, above: null },
      oneWayMs: [26, 0],
      steps: [
        arrive(0, 0),
        arrive(0, 0),
        arrive(0, 0),
        { kind: "step back", isolate: 0, backMs: 29 },
        { kind: "term end", isolate: 0, offsetMs: -1, burst: 2, others: 15 },
      ],
    };
    expect(await violationOf(c)).toBeNull();
  });
});

const LATE_REFUND: { params: AlgorithmParams } & Omit<Case, "params"> = {
  params: { algorithm: "gcra", rate: { amount: 5, periodMs: 3000, tokens: 1, perMs: 600 }, burst: 5 },
  lease: { ttlMs: 300, units: 1, above: null },
  oneWayMs: [33, 36, 11, 3],
  steps: [
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 322, isolate: 0, refund: "now" },
    { kind: "arrive", dtMs: 334, isolate: 0, refund: "after term" },
    { kind: "arrive", dtMs: 329, isolate: 0, refund: "none" },
    { kind: "burst", isolate: 0, n: 2, refund: "none" },
    { kind: "burst", isolate: 0, n: 2, refund: "none" },
    { kind: "arrive", dtMs: 28, isolate: 0, refund: "after term" },
    { kind: "burst", isolate: 0, n: 2, refund: "none" },
    { kind: "step back", isolate: 0, backMs: 1 },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 77, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 37, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 76, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 37, isolate: 0, refund: "none" },
    { kind: "term end", isolate: 0, offsetMs: 0 },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "burst", isolate: 0, n: 2, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "after term" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "step back", isolate: 0, backMs: 1 },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "term end", isolate: 0, offsetMs: 0 },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "now" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "now" },
  ],
};

const STEP_BACK: { params: AlgorithmParams } & Omit<Case, "params"> = {
  params: { algorithm: "fixed_window", limit: 8, window: { kind: "ms", ms: 500 } },
  lease: { ttlMs: 50, units: null, above: null },
  oneWayMs: [13, 0],
  steps: [
    { kind: "term end", isolate: 0, offsetMs: 0, burst: 0, others: 0 },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 13, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 3, isolate: 0, refund: "none" },
    { kind: "term end", isolate: 0, offsetMs: -1, burst: 0, others: 0 },
    { kind: "burst", isolate: 0, n: 2, refund: "none" },
    { kind: "burst", isolate: 0, n: 2, refund: "none" },
    { kind: "term end", isolate: 0, offsetMs: 0, burst: 0, others: 0 },
    { kind: "burst", isolate: 0, n: 2, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "step back", isolate: 0, backMs: 1 },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "now" },
    { kind: "arrive", dtMs: 4, isolate: 0, refund: "none" },
    { kind: "term end", isolate: 0, offsetMs: 0, burst: 0, others: 0 },
    { kind: "burst", isolate: 0, n: 2, refund: "none" },
    { kind: "arrive", dtMs: 1, isolate: 0, refund: "none" },
    { kind: "step back", isolate: 0, backMs: 289 },
    { kind: "arrive", dtMs: 3, isolate: 0, refund: "after term" },
    { kind: "arrive", dtMs: 10, isolate: 0, refund: "after term" },
    { kind: "term end", isolate: 1, offsetMs: 0, burst: 0, others: 0 },
    { kind: "arrive", dtMs: 9, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "now" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "now" },
    { kind: "step back", isolate: 0, backMs: 1 },
    { kind: "term end", isolate: 0, offsetMs: 0, burst: 0, others: 5 },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "none" },
    { kind: "arrive", dtMs: 0, isolate: 0, refund: "after term" },
  ],
};
