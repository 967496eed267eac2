/** "Did you mean": the known word nearest to a misspelt one, for messages about unknown keys and values. */

/** The known word nearest to `word` (edit distance <= 2, or a prefix of it), or null. */
export function closest(word: string, known: readonly string[]): string | null {
  const w = word.toLowerCase().replaceAll("-", "_");
  let best: string | null = null;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const k of known) {
    // An abbreviation (`timeout` for `timeout_ms`) is as good as one typo.
    const prefix = w.length >= 3 && k.startsWith(w);
    const d = prefix ? 1 : editDistance(w, k);
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return bestDistance <= 2 ? best : null;
}

/** Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent swaps (`brust` -> `burst`). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    const row = d[i]!;
    const prev = d[i - 1]!;
    for (let j = 1; j <= b.length; j++) {
      const sub = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + sub);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      row[j] = v;
    }
  }
  return d[a.length]![b.length]!;
}
