/**
 * The speed bounds every keyed local store is held to (issue 38), from one run of bench/decisions.ts: at one key
 * within 2x of keyed gcra (the packed one-number path), and at 100,000 keys faster than a naive `Map` GCRA. Read by
 * `npm run bench:check` (which fails on a miss) and by the report (which prints the verdicts next to section 1).
 */

export interface DecisionFigure {
  readonly name: string;
  readonly keys: number;
  readonly nsPerDecision: number;
}

export interface BoundVerdict {
  readonly store: string;
  readonly bound: string;
  readonly ratio: number;
  readonly ok: boolean;
}

/** At one key, a keyed store may take at most this many times keyed gcra's time. */
export const ONE_KEY_RATIO_TO_GCRA = 2;
export const MANY_KEYS = 100_000;

export function boundVerdicts(rows: readonly DecisionFigure[]): BoundVerdict[] {
  const ns = (name: string, keys: number) => rows.find((r) => r.name === name && r.keys === keys)?.nsPerDecision;
  const gcra1 = ns("keyed gcra", 1);
  const naiveMany = ns("naive Map GCRA", MANY_KEYS);
  const verdicts: BoundVerdict[] = [];
  for (const store of [...new Set(rows.filter((r) => r.name.startsWith("keyed ")).map((r) => r.name))]) {
    const one = ns(store, 1);
    const many = ns(store, MANY_KEYS);
    if (one !== undefined && gcra1 !== undefined) {
      const ratio = one / gcra1;
      verdicts.push({
        store,
        bound: `1 key: at most ${ONE_KEY_RATIO_TO_GCRA}x keyed gcra`,
        ratio: Math.round(ratio * 100) / 100,
        ok: ratio <= ONE_KEY_RATIO_TO_GCRA,
      });
    }
    if (many !== undefined && naiveMany !== undefined) {
      const ratio = many / naiveMany;
      verdicts.push({
        store,
        bound: "100k keys: faster than a naive Map GCRA",
        ratio: Math.round(ratio * 100) / 100,
        ok: ratio < 1,
      });
    }
  }
  return verdicts;
}
