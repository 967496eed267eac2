/**
 * The Worker's hot marks (src/isolate/hot_marks.ts) in the Workers Cache API: `caches.default`, one cache per data
 * center, shared by every isolate there and not replicated elsewhere. A mark is a tiny response under a URL made of
 * the key's object name (names.ts: a hash, never the key), kept `HOT_MARK_TTL_MS` (`Cache-Control: max-age`).
 * Best effort: no Cache API (tests in Node, `*.workers.dev`, where its operations do nothing), a miss or an error all
 * read as no mark, and the isolate learns from its own first call as before.
 */
import type { HotMarkStore, StoredMark } from "../isolate/hot_marks.ts";
import { type Sleep, systemSleep } from "../isolate/time.ts";
import { HOT_MARK_TTL_MS } from "../protocol/tunables.ts";

/** The cache key of a mark (a name no request can reach: the Cache API is only ever asked by this code). */
export function markUrl(name: string): string {
  return `https://hot-marks.sluice.invalid/${encodeURIComponent(name)}`;
}

/** The mark stored in a response body (`null`: not one of ours). */
export function parseMark(body: string): StoredMark | null {
  try {
    const value: unknown = JSON.parse(body);
    if (typeof value !== "object" || value === null) return null;
    const { spread, atMs } = value as { spread?: unknown; atMs?: unknown };
    if (typeof spread !== "boolean" && typeof spread !== "number") return null;
    return typeof atMs === "number" && Number.isFinite(atMs) ? { spread, atMs } : { spread };
  } catch {
    return null;
  }
}

/**
 * How long reading a mark may take, ms, before it counts as no mark: the read sits on the request path (before a new
 * key's first call), so a stalled cache must never hold a request.
 */
export const HOT_MARK_READ_MS = 50;

/** The data center's marks through `cache` (default: `caches.default` when the runtime has it; else none). */
export function cacheMarks(
  cache: Cache | null = defaultCache(),
  sleep: Sleep = systemSleep,
  readMs = HOT_MARK_READ_MS,
): HotMarkStore | null {
  if (cache === null) return null;
  return {
    read: (name) => Promise.race([readMark(cache, name), sleep(readMs).then(() => null)]),
    async write(name, mark) {
      const maxAge = Math.floor(HOT_MARK_TTL_MS / 1000);
      const response = new Response(JSON.stringify({ spread: mark.spread, atMs: mark.atMs }), {
        headers: { "content-type": "application/json", "cache-control": `max-age=${maxAge}` },
      });
      try {
        await cache.put(markUrl(name), response);
      } catch {
        // Best effort: the next isolate learns from its own call.
      }
    },
  };
}

async function readMark(cache: Cache, name: string): Promise<StoredMark | null> {
  try {
    const hit = await cache.match(markUrl(name));
    return hit === undefined ? null : parseMark(await hit.text());
  } catch {
    return null;
  }
}

function defaultCache(): Cache | null {
  const all = (globalThis as { caches?: { default?: Cache } }).caches;
  return all?.default ?? null;
}
