/**
 * Exact integer helpers. Every operand in the algorithms stays below 2^53 by construction (rule validation bounds
 * `capacity × perMs` and `limit × windowMs`, see `MAX_SCALED`), so plain numbers are exact, and so is a division
 * rounded down or up (see `floorDiv`).
 */

/** Upper bound for any scaled quantity an algorithm keeps (capacity × perMs, limit × windowMs). 2^50. */
export const MAX_SCALED = 2 ** 50;

/**
 * floor(n / d) for safe integers n and d > 0, exact. The float quotient is within |n / d| × 2^-53 < 1/d of n / d,
 * and a quotient that is not an integer is at least 1/d away from the integers on either side, so rounding never
 * reaches one. (A correction from the remainder `n − q × d` would be wrong: past 2^53 that product is rounded, and it
 * turned floor(−(2^53 − 1) / 5) into −1801439850948198.)
 */
export function floorDiv(n: number, d: number): number {
  return Math.floor(n / d);
}

/** ceil(n / d) for safe integers n and d > 0, exact. */
export function ceilDiv(n: number, d: number): number {
  return 0 - floorDiv(-n, d); // "0 -" rather than unary minus: never -0
}

/** n mod d in [0, d) for safe integers n and d > 0, exact (`%` is exact; `n − floorDiv(n, d) × d` is not past 2^53). */
export function floorMod(n: number, d: number): number {
  const r = n % d; // the sign of n, and -0 for a negative multiple of d
  return r < 0 ? r + d : r === 0 ? 0 : r;
}

export function gcd(a: number, b: number): number {
  let x = Math.abs(a);
  let y = Math.abs(b);
  while (y !== 0) {
    const t = x % y;
    x = y;
    y = t;
  }
  return x;
}
