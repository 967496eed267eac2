/**
 * How raw keys (API keys, addresses, user ids) appear in object names, logs and metrics: SHA-256 hex, or, when the
 * `KEY_HASH_SECRET` secret is set, HMAC-SHA256 hex under it. A plain SHA-256 of an IPv4 address is reversed by
 * hashing all 2^32 addresses; an HMAC under a secret is not. The account lookup in KV stays keyed by the plain SHA-256
 * of the API key (scripts/seed-accounts.mjs and the account system write it without knowing the secret).
 */
const encoder = new TextEncoder();

export async function sha256Hex(text: string): Promise<string> {
  return hex(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

function hex(buffer: ArrayBuffer): string {
  const digest = new Uint8Array(buffer);
  let out = "";
  for (const byte of digest) out += byte.toString(16).padStart(2, "0");
  return out;
}

/** One imported HMAC key per secret (an isolate sees one secret; tests may use a few). */
const hmacKeys = new Map<string, Promise<CryptoKey>>();

export async function hmacSha256Hex(secret: string, text: string): Promise<string> {
  let key = hmacKeys.get(secret);
  if (key === undefined) {
    key = crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    hmacKeys.set(secret, key);
  }
  return hex(await crypto.subtle.sign("HMAC", await key, encoder.encode(text)));
}

/** Keys hashed lately, at most this many (about 200 bytes each): a client's requests hash one address again and again. */
const RECENT_KEYS = 1024;
/** Recent keys' hashes under `recentSecret` (an isolate sees one secret), oldest first; never logged. */
const recentHashes = new Map<string, string>();
let recentSecret: string | null = null;

/**
 * The key hash for object names, logs and metrics: HMAC-SHA256 under `secret` when set, else SHA-256. A recent key's
 * hash is remembered (a string, never another request's promise: awaiting that could resume in its context).
 */
export async function keyHashOf(secret: string | null, text: string): Promise<string> {
  if (secret !== recentSecret) {
    recentHashes.clear();
    recentSecret = secret;
  }
  const known = recentHashes.get(text);
  if (known !== undefined) return known;
  const hash = secret === null ? await sha256Hex(text) : await hmacSha256Hex(secret, text);
  if (secret === recentSecret) {
    if (recentHashes.size >= RECENT_KEYS) recentHashes.delete(recentHashes.keys().next().value!);
    recentHashes.set(text, hash);
  }
  return hash;
}

/**
 * Equal strings, in time that depends only on their hashes' length (fixed): both sides are hashed first, so neither
 * the position of the first difference nor the secret's length shows in the timing.
 */
export async function constantTimeEqual(a: string, b: string): Promise<boolean> {
  const [x, y] = await Promise.all([
    crypto.subtle.digest("SHA-256", encoder.encode(a)),
    crypto.subtle.digest("SHA-256", encoder.encode(b)),
  ]);
  const u = new Uint8Array(x);
  const v = new Uint8Array(y);
  let diff = 0;
  for (let i = 0; i < u.length; i++) diff |= u[i]! ^ v[i]!;
  return diff === 0;
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
