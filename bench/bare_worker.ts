/**
 * The bare Workers the object benchmarks compare Sluice with (object_memory.ts, object_churn.ts, object_limit.ts):
 * their shared fetch handler and wrangler.toml, a temp copy to run `wrangler dev` in, and the clients' addresses.
 */
import { mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./common.ts";

/** The Worker's entry of a bare counter: one `Counter` object per client address, one `check(1)` per request. */
export const BARE_FETCH = `export default {
  async fetch(request, env) {
    const key = request.headers.get("CF-Connecting-IP") ?? "none";
    const n = await env.COUNTER.get(env.COUNTER.idFromName(key)).check(1);
    return new Response(String(n));
  },
};
`;

/** wrangler.toml of a bare Worker named `name` with one SQLite-backed `Counter` class bound as COUNTER. */
export const bareToml = (name: string) => `name = "${name}"
main = "index.js"
compatibility_date = "2026-04-20"
[[durable_objects.bindings]]
name = "COUNTER"
class_name = "Counter"
[[migrations]]
tag = "v1"
new_sqlite_classes = ["Counter"]
`;

/** A temp dir holding `source` as index.js and `toml` as wrangler.toml, node_modules linked: `wrangler dev` runs there. */
export function bareWorkerCopy(prefix: string, source: string, toml: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  writeFileSync(join(dir, "index.js"), source);
  writeFileSync(join(dir, "wrangler.toml"), toml);
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  return dir;
}

/** Key `i`: an IPv6 documentation address, one /64 each (Sluice groups IPv6 clients by /64). */
export function ipv6Of(i: number): string {
  const n = i + 1;
  return `2001:db8:${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}::1`;
}

/**
 * A bare Worker's counter object (the Durable Object the object benchmarks compare Sluice's with): one number in its
 * storage; with `alarmAt` (a JavaScript expression for the alarm's time), an alarm that deletes it, as Sluice's does.
 */
export const bareCounterWorker = (alarmAt: string | null) => `import { DurableObject } from "cloudflare:workers";
export class Counter extends DurableObject {
  async check(n) {
    const next = (this.ctx.storage.kv.get("n") ?? 0) + n;
    this.ctx.storage.kv.put("n", next);
    ${alarmAt !== null ? `if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(${alarmAt});` : ""}
    return next;
  }
  ${alarmAt !== null ? "async alarm() { await this.ctx.storage.deleteAll(); }" : ""}
}
${BARE_FETCH}`;
