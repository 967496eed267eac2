/**
 * Exact integer helpers. Every operand in the algorithms stays below 2^53 by construction (rule validation bounds
 * `capacity × perMs` and `limit × windowMs`, see `MAX_SCALED`), so plain numbers are exact; division is corrected
 * so that a rounded floating-point quotient never leaks into a result.
 */

/** Upper bound for any scaled quantity an algorithm keeps (capacity × perMs, limit × windowMs). 2^50. */
export const MAX_SCALED = 2 ** 50;

/** floor(n / d) for integers n and d > 0, exact. */
export function floorDiv(n: number, d: number): number {
  let q = Math.floor(n / d);
  const r = n - q * d;
  // The float quotient can be off by one when it rounds across an integer; fix it with the exact remainder.
  if (r < 0) q -= 1;
  else if (r >= d) q += 1;
  return q;
}

/** ceil(n / d) for integers n and d > 0, exact. */
export function ceilDiv(n: number, d: number): number {
  return 0 - floorDiv(-n, d); // "0 -" rather than unary minus: never -0
}

/** n mod d in [0, d) for integers n and d > 0. */
export function floorMod(n: number, d: number): number {
  return n - floorDiv(n, d) * d;
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
