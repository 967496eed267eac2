/**
 * How many random cases a fast-check property tries. `npm test` runs each property's full count. Mutation testing
 * (`npm run test:mutation`, vitest.mutation.config.ts) runs the same properties once per mutant, over a thousand
 * times, so it sets SLUICE_FC_RUNS_DIVISOR and each property tries a fraction of its cases there (at least 20).
 * Fewer cases can only let a mutant live that more cases would kill, so the mutation score can only come out lower
 * for it, never higher.
 */
const divisor = Number(process.env.SLUICE_FC_RUNS_DIVISOR ?? "1");

export function runs(full: number): number {
  if (!(divisor > 1)) return full;
  return Math.min(full, Math.max(20, Math.ceil(full / divisor)));
}
