/** SHA-256 hex: how raw keys (API keys, addresses, user ids) appear in object names, KV keys and logs. */
const encoder = new TextEncoder();

export async function sha256Hex(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
  let out = "";
  for (const byte of digest) out += byte.toString(16).padStart(2, "0");
  return out;
}

/**
 * Extra whole seconds in [0, maxS] for one client of one rule: deterministic (the same client always gets the same
 * offset, so retrying never re-rolls it) and spread evenly across clients. `keyHash` is already a SHA-256 hex.
 */
export function jitterSeconds(keyHash: string, ruleId: string, maxS: number): number {
  if (maxS <= 0) return 0;
  // FNV-1a over the rule id and the key hash: cheap, and the hash input is already uniform.
  let h = 0x811c9dc5;
  const text = `${ruleId}\u0000${keyHash}`;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % (maxS + 1);
}
