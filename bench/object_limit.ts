/**
 * `node --import tsx bench/object_limit.ts [--max N] [--step N]`: how many Durable Objects one local `wrangler dev`
 * (workerd) keeps live before SQLite answers `SQLITE_NOMEM`, with no Sluice code at all. Local workerd 1.20260426.1
 * caps SQLite's heap for the whole process at 512 MiB (`sqlite3_hard_heap_limit64` in src/workerd/util/sqlite.c++;
 * 8 GiB only behind the `INCREASE_SQLITE_HARD_HEAP_LIMIT` autogate, off in wrangler dev), and every live object holds
 * its own SQLite database; on Cloudflare objects are spread over many processes and machines.
 *
 * The Worker has one Durable Object class whose one RPC method reads and writes one value (`ctx.storage.kv`), and a
 * route that calls `n` objects at once (`/fan?from=i&n=n`). Round k calls objects 0 .. k × step - 1 (the earlier ones
 * again, so none idles into eviction, and `step` new ones); it stops at the first round with a failed call (recording
 * the first error) or at `--max` live objects.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { bareToml, bareWorkerCopy } from "./bare_worker.ts";
import { log, round, writeResult } from "./common.ts";
import { freePort, groupRss, killGroup, startWrangler, waitUp } from "./wrangler_dev.ts";

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(name);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
};
const MAX = arg("--max", 12_000);
const STEP = arg("--step", 500);
/** Objects per `/fan` call, and calls in flight. */
const FAN = 250;
const IN_FLIGHT = 4;

const WORKER = `import { DurableObject } from "cloudflare:workers";
export class Counter extends DurableObject {
  async check(n) {
    const next = (this.ctx.storage.kv.get("n") ?? 0) + n;
    this.ctx.storage.kv.put("n", next);
    return next;
  }
}
export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname !== "/fan") return new Response("ok");
    const from = Number(url.searchParams.get("from"));
    const n = Number(url.searchParams.get("n"));
    const calls = Array.from({ length: n }, (_, i) => env.COUNTER.get(env.COUNTER.idFromName("k" + (from + i))).check(1));
    const results = await Promise.allSettled(calls);
    const failed = results.filter((r) => r.status === "rejected").map((r) => String(r.reason));
    return Response.json({ ok: n - failed.length, failed: failed.length, first: failed[0] ?? null });
  },
};
`;

const TOML = bareToml("object-limit");

interface Round {
  readonly live: number;
  readonly seconds: number;
  readonly failed: number;
  readonly workerdRssMb: number;
}

async function fanRound(base: string, count: number): Promise<{ failed: number; first: string | null }> {
  let next = 0;
  let failed = 0;
  let first: string | null = null;
  const worker = async () => {
    for (;;) {
      const from = next;
      next += FAN;
      if (from >= count) return;
      const n = Math.min(FAN, count - from);
      try {
        const r = await fetch(`${base}/fan?from=${from}&n=${n}`, { signal: AbortSignal.timeout(60_000) });
        const body = (await r.json()) as { failed: number; first: string | null };
        failed += body.failed;
        first ??= body.first;
      } catch (error) {
        failed += n;
        first ??= String(error);
      }
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  return { failed, first };
}

async function main(): Promise<void> {
  const dir = bareWorkerCopy("sluice-objlimit-", WORKER, TOML);
  const state = mkdtempSync(join("/dev/shm", "sluice-objlimit-state-"));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = startWrangler(dir, port, ["--persist-to", state, "--log-level", "error"], "pipe");
  let output = "";
  child.stdout?.on("data", (b: Buffer) => {
    output += b.toString();
  });
  child.stderr?.on("data", (b: Buffer) => {
    output += b.toString();
  });
  const rounds: Round[] = [];
  let firstError: string | null = null;
  try {
    await waitUp(`${base}/`, child, 90_000);
    for (let live = STEP; live <= MAX; live += STEP) {
      const t = Date.now();
      const { failed, first } = await fanRound(base, live);
      const seconds = (Date.now() - t) / 1000;
      const workerdRssMb = round(groupRss(child.pid!).workerdKb / 1024, 1);
      rounds.push({ live, seconds: round(seconds, 1), failed, workerdRssMb });
      log(
        `object_limit: ${live} objects called in ${round(seconds, 1)} s, ${failed} failed, workerd ${workerdRssMb} MB`,
      );
      if (seconds > 9) log("object_limit: a round took over 9 s: the earliest objects may have been evicted meanwhile");
      if (failed > 0) {
        firstError = first;
        break;
      }
    }
  } finally {
    await killGroup(child.pid!, child);
    rmSync(state, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  }
  const nomem = (output.match(/SQLITE_NOMEM/g) ?? []).length;
  const lastOk = [...rounds].reverse().find((r) => r.failed === 0)?.live ?? 0;
  const firstFailing = rounds.find((r) => r.failed > 0)?.live ?? null;
  const command = `node --import tsx bench/object_limit.ts${process.argv.slice(2).length ? ` ${process.argv.slice(2).join(" ")}` : ""}`;
  const path = writeResult("object_limit", command, {
    step: STEP,
    max: MAX,
    rounds,
    lastOk,
    firstFailing,
    firstError,
    sqliteNomemInServerLog: nomem,
  });
  process.stdout.write(
    `\nlive objects all answered: ${lastOk}; first failing round: ${firstFailing ?? "none up to " + MAX}\n` +
      `first error: ${firstError ?? "-"}\nSQLITE_NOMEM lines in the server's output: ${nomem}\n`,
  );
  log(`object_limit: wrote ${path}`);
}

await main();
