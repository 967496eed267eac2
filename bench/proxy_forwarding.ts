/**
 * Hand-run (`node --import tsx bench/proxy_forwarding.ts [--mb 100] [--ttfb-runs 30] [--variants bare,sluice]`): what
 * forwarding costs workerd's memory and a streamed response's first byte, for Sluice (`UPSTREAM_URL`) and for a bare
 * forwarding Worker, each in its own `wrangler dev` in front of the recording origin (test/support/recording_origin.ts):
 * - a `--mb` MB upload (chunked, 1 MiB chunks) and a `--mb` MB download, with the RSS of both workerd processes of
 *   `wrangler dev` (the Worker's, and wrangler's dev proxy) sampled from /proc every 20 ms: growth over the RSS after
 *   a warm-up is what forwarding holds (a buffered body would hold all of it);
 * - the time to the first byte of a streamed response (`text/event-stream`, the origin's first event), through the
 *   Worker and from the origin alone, medians of `--ttfb-runs` each, one after the other.
 * Prints one JSON object; bench/NOTES.md has the run.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { send } from "../test/support/raw_client.ts";
import { type RecordingOrigin, startRecordingOrigin } from "../test/support/recording_origin.ts";
import {
  dropBuildStep,
  projectCopy,
  ROOT,
  shippedRules,
  startWrangler,
  stopWrangler,
} from "../test/support/wrangler_dev.ts";

const { values } = parseArgs({
  options: {
    mb: { type: "string", default: "100" },
    "ttfb-runs": { type: "string", default: "30" },
    variants: { type: "string", default: "bare,sluice" },
  },
});
const MB = Number(values.mb);
const RUNS = Number(values["ttfb-runs"]);
const VARIANTS = values.variants.split(",").map((v) => {
  if (v !== "bare" && v !== "sluice") throw new Error(`--variants: bare or sluice, got ${v}`);
  return v;
});

/**
 * `wrangler dev` runs two workerd processes: its dev proxy (the one listening on the port the client calls, which
 * exists only under `wrangler dev`) and the one running the Worker (the one with an inspector), as in production.
 */
interface Workerds {
  readonly worker: number;
  readonly devProxy: number;
}
type Kb = { readonly [P in keyof Workerds]: number };

function workerdPids(pgid: number): Workerds {
  const out = execFileSync("ps", ["-o", "pid=,args=", "-g", String(pgid)], { encoding: "utf8" });
  const lines = out.split("\n").filter((l) => /\/workerd serve /.test(l));
  const worker = lines.find((l) => l.includes("--inspector-addr"));
  const devProxy = lines.find((l) => !l.includes("--inspector-addr"));
  if (worker === undefined || devProxy === undefined) throw new Error(`not two workerds in group ${pgid}:\n${out}`);
  return { worker: Number(worker.trim().split(/\s+/)[0]), devProxy: Number(devProxy.trim().split(/\s+/)[0]) };
}

const rssKb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]);
const rssOf = (pids: Workerds): Kb => ({ worker: rssKb(pids.worker), devProxy: rssKb(pids.devProxy) });

/** Run `work` while sampling both processes' RSS every 20 ms; each one's peak in KiB. */
async function peakDuring(pids: Workerds, work: () => Promise<unknown>): Promise<Kb> {
  let peak = rssOf(pids);
  const sample = () => {
    const now = rssOf(pids);
    peak = { worker: Math.max(peak.worker, now.worker), devProxy: Math.max(peak.devProxy, now.devProxy) };
  };
  const timer = setInterval(sample, 20);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  sample();
  return peak;
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

/**
 * The bare forwarding Worker Sluice is compared with: every request sent on to `UPSTREAM_URL` by the runtime's fetch,
 * its response returned as it came (no re-wrap, no header added).
 */
const BARE_FORWARDER = `export default {
  fetch(request, env) {
    const url = new URL(request.url);
    return fetch(env.UPSTREAM_URL + url.pathname + url.search, request);
  },
};
`;

const bareToml = `name = "bench-bare-forwarder"
main = "index.js"
compatibility_date = "2026-04-20"
`;

/** MB grown by the workerd running the Worker and by wrangler dev's proxy. */
interface Growth {
  readonly worker: number;
  readonly dev_proxy: number;
}

interface Figures {
  readonly variant: string;
  readonly workerd_rss_after_warmup_mb: { readonly worker: number; readonly dev_proxy: number };
  readonly upload_peak_growth_mb: Growth;
  readonly download_peak_growth_mb: Growth;
  readonly download_gzip_peak_growth_mb: Growth;
  readonly ttfb_median_ms: { readonly through_worker: number; readonly origin_alone: number };
  readonly ttfb_ratio: number;
}

const toMb = (kb: number) => +(kb / 1024).toFixed(1);
const growthMb = (peak: Kb, before: Kb) => ({
  worker: toMb(peak.worker - before.worker),
  dev_proxy: toMb(peak.devProxy - before.devProxy),
});

/** One `wrangler dev` (Sluice, or the bare forwarder) in front of `origin`, measured as the header says. */
async function measure(variant: "sluice" | "bare", origin: RecordingOrigin): Promise<Figures> {
  const dir = variant === "sluice" ? projectCopy("sluice-bench-proxy-", shippedRules()) : bareCopy();
  if (variant === "sluice") dropBuildStep(dir);
  const state = mkdtempSync(join(tmpdir(), "sluice-bench-proxy-state-"));
  const worker = await startWrangler(
    state,
    { UPSTREAM_URL: origin.base, ECHO_ORIGIN: "false", LIMITER_TIMEOUT_MS: "5000" },
    dir,
  );
  try {
    return await measureRunning(variant, worker.base, workerdPids(worker.child.pid!), origin);
  } finally {
    await stopWrangler(worker);
    rmSync(dir, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  }
}

function bareCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), "sluice-bench-bare-forwarder-"));
  writeFileSync(join(dir, "index.js"), BARE_FORWARDER);
  writeFileSync(join(dir, "wrangler.toml"), bareToml);
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
  return dir;
}

// long: one measurement, its steps in the order the header lists them
async function measureRunning(
  variant: string,
  base: string,
  pids: Workerds,
  origin: RecordingOrigin,
): Promise<Figures> {
  const ip = { "CF-Connecting-IP": "198.51.100.77" };
  const headers: [string, string][] = [["CF-Connecting-IP", "203.0.113.77"]];
  // Warm-up: the isolate, the limiter objects, a small upload and download.
  for (let i = 0; i < 5; i++) {
    await send(base, { method: "PUT", target: "/v1/warm", headers, body: [Buffer.alloc(1 << 20)] });
    await send(base, { method: "GET", target: "/v1/warm", headers: [...headers, ["X-Test-Respond", "bytes:1048576"]] });
  }
  const baseKb = rssOf(pids);
  const block = Buffer.alloc(1 << 20, 1);
  async function* upload() {
    for (let i = 0; i < MB; i++) yield block;
  }
  const up = await peakDuring(pids, async () => {
    const r = await send(base, { method: "PUT", target: "/v1/upload", headers, body: upload() }, 600_000);
    if (r.status !== 200 || origin.received.at(-1)?.bodyBytes !== MB << 20) throw new Error(`upload: ${r.status}`);
  });
  const afterUpKb = rssOf(pids);
  // Without compression first (a client that sends no Accept-Encoding), then as Node's fetch asks (gzip, deflate):
  // the runtime then compresses the origin's answer itself.
  const download = (encoding: string) => async () => {
    const r = await fetch(`${base}/v1/download`, {
      headers: { ...ip, "Accept-Encoding": encoding, "X-Test-Respond": `bytes:${MB << 20}` },
    });
    let n = 0;
    for await (const c of r.body!) n += (c as Uint8Array).byteLength;
    if (encoding === "identity" && n !== MB << 20) throw new Error(`download: ${n} bytes`);
  };
  const down = await peakDuring(pids, download("identity"));
  const afterDownKb = rssOf(pids);
  const downGzip = await peakDuring(pids, download("gzip, deflate"));
  const through: number[] = [];
  const alone: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const h = { "CF-Connecting-IP": "203.0.113.78", "X-Test-Respond": "sse:1" };
    through.push(await firstByteMs(base, h));
    alone.push(await firstByteMs(origin.base, h));
    origin.ack();
    origin.ack();
  }
  return {
    variant,
    workerd_rss_after_warmup_mb: { worker: toMb(baseKb.worker), dev_proxy: toMb(baseKb.devProxy) },
    upload_peak_growth_mb: growthMb(up, baseKb),
    download_peak_growth_mb: growthMb(down, afterUpKb),
    download_gzip_peak_growth_mb: growthMb(downGzip, afterDownKb),
    ttfb_median_ms: { through_worker: +median(through).toFixed(1), origin_alone: +median(alone).toFixed(1) },
    ttfb_ratio: +(median(through) / median(alone)).toFixed(1),
  };
}

const origin = await startRecordingOrigin();
try {
  const results: Figures[] = [];
  for (const variant of VARIANTS) results.push(await measure(variant, origin));
  const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  const machine = `${cpus().length} cores (${cpus()[0]?.model}), Node ${process.version}, load average ${load}`;
  console.log(JSON.stringify({ machine, mb: MB, results }, null, 2));
} finally {
  await origin.close();
}
