/**
 * Hand-run (`node --import tsx bench/proxy_forwarding.ts [--mb 100] [--ttfb-runs 30]`): what forwarding costs
 * workerd's memory and a streamed response's first byte. `wrangler dev` (Sluice, `UPSTREAM_URL`) in front of the
 * recording origin (test/support/recording_origin.ts):
 * - a `--mb` MB upload (chunked, 1 MiB chunks) and a `--mb` MB download, with workerd's RSS sampled from /proc every
 *   20 ms: its growth over the RSS after a warm-up is what forwarding holds (a buffered body would hold all of it);
 * - the time to the first byte of a streamed response (`text/event-stream`, the origin's first event), through Sluice
 *   and from the origin alone, medians of `--ttfb-runs` each, one after the other.
 * Prints one JSON object; bench/NOTES.md has the run.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:http";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { send } from "../test/support/raw_client.ts";
import { startRecordingOrigin } from "../test/support/recording_origin.ts";
import { dropBuildStep, projectCopy, shippedRules, startWrangler, stopWrangler } from "../test/support/wrangler_dev.ts";

const { values } = parseArgs({
  options: { mb: { type: "string", default: "100" }, "ttfb-runs": { type: "string", default: "30" } },
});
const MB = Number(values.mb);
const RUNS = Number(values["ttfb-runs"]);

function workerdPid(pgid: number): number {
  const out = execFileSync("ps", ["-o", "pid=,comm=", "-g", String(pgid)], { encoding: "utf8" });
  const line = out.split("\n").find((l) => l.trim().endsWith("workerd"));
  if (line === undefined) throw new Error(`no workerd in process group ${pgid}:\n${out}`);
  return Number(line.trim().split(/\s+/)[0]);
}

const rssKb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]);

/** Run `work` while sampling `pid`'s RSS; the peak in KiB. */
async function peakDuring(pid: number, work: () => Promise<unknown>): Promise<number> {
  let peak = rssKb(pid);
  const timer = setInterval(() => {
    peak = Math.max(peak, rssKb(pid));
  }, 20);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  return Math.max(peak, rssKb(pid));
}

/** Milliseconds from sending a GET to its response's first body byte. */
function firstByteMs(base: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const url = new URL(base);
    const started = performance.now();
    const req = request({ host: url.hostname, port: url.port, path: "/v1/events", headers, agent: false }, (res) => {
      res.once("data", () => {
        const ms = performance.now() - started;
        res.destroy();
        resolve(ms);
      });
      res.on("error", () => undefined);
    });
    req.on("error", reject);
    req.end();
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const origin = await startRecordingOrigin();
const dir = projectCopy("sluice-bench-proxy-", shippedRules());
dropBuildStep(dir);
const state = mkdtempSync(join(tmpdir(), "sluice-bench-proxy-state-"));
const sluice = await startWrangler(
  state,
  { UPSTREAM_URL: origin.base, ECHO_ORIGIN: "false", LIMITER_TIMEOUT_MS: "5000" },
  dir,
);
try {
  const pid = workerdPid(sluice.child.pid!);
  const ip = { "CF-Connecting-IP": "198.51.100.77" };
  const headers: [string, string][] = [["CF-Connecting-IP", "203.0.113.77"]];
  // Warm-up: the isolate, the limiter objects, a small upload and download.
  for (let i = 0; i < 5; i++) {
    await send(sluice.base, { method: "PUT", target: "/v1/warm", headers, body: [Buffer.alloc(1 << 20)] });
    await send(sluice.base, {
      method: "GET",
      target: "/v1/warm",
      headers: [...headers, ["X-Test-Respond", "bytes:1048576"]],
    });
  }
  const baseKb = rssKb(pid);
  const block = Buffer.alloc(1 << 20, 1);
  async function* upload() {
    for (let i = 0; i < MB; i++) yield block;
  }
  const up = await peakDuring(pid, async () => {
    const r = await send(sluice.base, { method: "PUT", target: "/v1/upload", headers, body: upload() }, 600_000);
    if (r.status !== 200 || origin.received.at(-1)?.bodyBytes !== MB << 20) throw new Error(`upload: ${r.status}`);
  });
  const afterUpKb = rssKb(pid);
  // Without compression first (a client that sends no Accept-Encoding), then as Node's fetch asks (gzip, deflate):
  // the runtime then compresses the origin's answer itself.
  const download = (encoding: string) => async () => {
    const r = await fetch(`${sluice.base}/v1/download`, {
      headers: { ...ip, "Accept-Encoding": encoding, "X-Test-Respond": `bytes:${MB << 20}` },
    });
    let n = 0;
    for await (const c of r.body!) n += (c as Uint8Array).byteLength;
    if (encoding === "identity" && n !== MB << 20) throw new Error(`download: ${n} bytes`);
  };
  const down = await peakDuring(pid, download("identity"));
  const afterDownKb = rssKb(pid);
  const downGzip = await peakDuring(pid, download("gzip, deflate"));
  const through: number[] = [];
  const alone: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const h = { "CF-Connecting-IP": "203.0.113.78", "X-Test-Respond": "sse:1" };
    through.push(await firstByteMs(sluice.base, h));
    alone.push(await firstByteMs(origin.base, h));
    origin.ack();
    origin.ack();
  }
  const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  console.log(
    JSON.stringify(
      {
        machine: `${cpus().length} cores (${cpus()[0]?.model}), Node ${process.version}, load average ${load}`,
        mb: MB,
        workerd_rss_after_warmup_mb: +(baseKb / 1024).toFixed(1),
        upload_peak_growth_mb: +((up - baseKb) / 1024).toFixed(1),
        download_peak_growth_mb: +((down - afterUpKb) / 1024).toFixed(1),
        download_gzip_peak_growth_mb: +((downGzip - afterDownKb) / 1024).toFixed(1),
        ttfb_median_ms: { through_sluice: +median(through).toFixed(1), origin_alone: +median(alone).toFixed(1) },
        ttfb_ratio: +(median(through) / median(alone)).toFixed(1),
      },
      null,
      2,
    ),
  );
} finally {
  await stopWrangler(sluice);
  await origin.close();
  rmSync(dir, { recursive: true, force: true });
  rmSync(state, { recursive: true, force: true });
}
