/** A fast, non-cryptographic 64-bit hash of a string, as two uint32 halves (for in-memory tables, not for names). */

/** Both halves of the hash of `s`: `[hi, lo]`. */
export function hash64(s: string): [number, number] {
  const out = new Uint32Array(2);
  hash64Into(s, out);
  return [out[0]!, out[1]!];
}

/**
 * The hash of `s` written into `out[0]` (hi) and `out[1]` (lo): the allocation-free form for hot paths (a store
 * checks a key per request; a fresh `[hi, lo]` array each time is garbage the collector has to sweep).
 */
export function hash64Into(s: string, out: Uint32Array): void {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  // Final avalanche (cyrb53's mixing, kept to 64 bits).
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507);
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507);
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  out[0] = h1;
  out[1] = h2;
}
