/**
 * Part 4: how far sliding_counter's estimate is from the exact sliding window, on synthetic traffic with many keys.
 *
 * Primary measure (Cloudflare's): each counter decision is judged against the exact count of the requests the counter
 * itself admitted in the sliding window: "wrongly admitted" if the exact window was already full, "wrongly denied" if
 * it had room. Secondary ("independent"): sliding_log runs beside it with its own state, as a second deployment
 * would, and every disagreement counts; there one early difference cascades, so it overstates the estimate's error.
 * Shares are of all requests. Cloudflare published 0.003% of 400 million real requests wrongly allowed or limited.
 */

import type { AlgorithmState } from "../src/algorithms/index.ts";
import { decide } from "../src/algorithms/index.ts";
import { mulberry32 as prng } from "../src/cli/gen.ts";
import { slidingCounter, slidingLog } from "../test/support/params.ts";
import { log, QUICK, round, writeResult } from "./common.ts";

const LIMIT = 100;
const WINDOW_MS = 60_000;
const SPAN_MS = 20 * WINDOW_MS;
const KEYS = QUICK ? 1_500 : 6_000;
const T0 = 1_700_000_040_000; // not window-aligned on purpose: clients do not start on a boundary

type Profile = "typical" | "steady" | "bursty" | "boundary-packed";

/** One client's request times (ms, ascending). */
function traffic(profile: Profile, rand: () => number): number[] {
  const times: number[] = [];
  if (profile === "typical") {
    // Most clients far below the limit, a few over it: Poisson at 1.2 × u³ of the limit's rate (u uniform), so the
    // median client sends 15% of the limit and about 6% of clients exceed it. Closest to real traffic here.
    const perMs = (1.2 * rand() ** 3 * LIMIT) / WINDOW_MS + 1e-9;
    for (let t = T0 - Math.log(1 - rand()) / perMs; t < T0 + SPAN_MS; t += -Math.log(1 - rand()) / perMs)
      times.push(Math.floor(t));
  } else if (profile === "steady") {
    // Poisson arrivals at 0.5x to 1.5x the limit's average rate.
    const perMs = ((0.5 + rand()) * LIMIT) / WINDOW_MS;
    for (let t = T0 - Math.log(1 - rand()) / perMs; t < T0 + SPAN_MS; t += -Math.log(1 - rand()) / perMs)
      times.push(Math.floor(t));
  } else if (profile === "bursty") {
    // On/off: bursts of 2-10 s at 5-30 requests/s, then 5-60 s of silence.
    let t = T0 + rand() * WINDOW_MS;
    while (t < T0 + SPAN_MS) {
      const end = t + 2_000 + rand() * 8_000;
      const perMs = (5 + rand() * 25) / 1000;
      for (; t < end; t += -Math.log(1 - rand()) / perMs) times.push(Math.floor(t));
      t += 5_000 + rand() * 55_000;
    }
  } else {
    // Packed around window boundaries: 60-120% of the limit in the last 3 s of a window, again in the first 3 s of
    // the next one, then quiet for a while (the pattern that defeats fixed windows).
    const first = Math.ceil(T0 / WINDOW_MS);
    for (let w = first; (w + 1) * WINDOW_MS < T0 + SPAN_MS; w += 2 + Math.floor(rand() * 3)) {
      const edge = (w + 1) * WINDOW_MS;
      for (const [from, to] of [
        [edge - 3_000, edge],
        [edge, edge + 3_000],
      ] as const) {
        const n = Math.floor(LIMIT * (0.6 + 0.6 * rand()));
        const batch = Array.from({ length: n }, () => Math.floor(from + rand() * (to - from)));
        times.push(...batch.sort((a, b) => a - b));
      }
    }
  }
  return times;
}

function main(): void {
  const exact = slidingLog(LIMIT, WINDOW_MS);
  const rows = [];
  for (const countDenied of [false, true]) {
    const approx = slidingCounter(LIMIT, WINDOW_MS, countDenied);
    for (const profile of ["typical", "steady", "bursty", "boundary-packed"] as const) {
      const rand = prng(profile.length * 7919 + 1);
      let requests = 0;
      let wronglyAdmitted = 0;
      let wronglyDenied = 0;
      let shadowAdmitted = 0;
      let shadowDenied = 0;
      let deniedExact = 0;
      for (let k = 0; k < KEYS; k++) {
        let logState: AlgorithmState | null = null;
        let counterState: AlgorithmState | null = null;
        // The counter's own admissions, for the exact count over its history: times in (t - W, t].
        const admitted: number[] = [];
        let oldest = 0;
        for (const t of traffic(profile, rand)) {
          const a = decide(exact, logState, 1, t);
          const b = decide(approx, counterState, 1, t);
          if (!a.ok || !b.ok) throw new Error("unexpected error decision");
          logState = a.state;
          counterState = b.state;
          requests++;
          if (!a.decision.allowed) deniedExact++;
          if (b.decision.allowed && !a.decision.allowed) wronglyAdmitted++;
          if (!b.decision.allowed && a.decision.allowed) wronglyDenied++;
          while (oldest < admitted.length && t - admitted[oldest]! >= WINDOW_MS) oldest++;
          const exactFits = admitted.length - oldest + 1 <= LIMIT;
          if (b.decision.allowed && !exactFits) shadowAdmitted++;
          if (!b.decision.allowed && exactFits) shadowDenied++;
          if (b.decision.allowed) admitted.push(t);
        }
      }
      const pct = (n: number) => round((100 * n) / requests, 4);
      const row = {
        profile,
        countDenied,
        keys: KEYS,
        requests,
        deniedByExactPct: pct(deniedExact),
        wronglyAdmittedPct: pct(shadowAdmitted),
        wronglyDeniedPct: pct(shadowDenied),
        wrongPct: pct(shadowAdmitted + shadowDenied),
        independent: {
          wronglyAdmittedPct: pct(wronglyAdmitted),
          wronglyDeniedPct: pct(wronglyDenied),
        },
      };
      rows.push(row);
      log(
        `accuracy ${profile.padEnd(16)} count_denied=${countDenied}: ${requests} requests, wrongly admitted ${row.wronglyAdmittedPct}%, wrongly denied ${row.wronglyDeniedPct}% (independent: ${row.independent.wronglyAdmittedPct}% / ${row.independent.wronglyDeniedPct}%)`,
      );
    }
  }
  writeResult("accuracy", `node --import tsx bench/accuracy.ts${QUICK ? " --quick" : ""}`, {
    limit: LIMIT,
    windowMs: WINDOW_MS,
    spanMs: SPAN_MS,
    cloudflarePublishedWrongPct: 0.003,
    rows,
  });
}

main();
