/**
 * BENCHMARKS.md section 3 from bench/results/edge.json (bench/edge.ts): CPU per request of each scenario beside the
 * bare forwarding Worker's, net of the idle `wrangler dev`'s own CPU (the goals' figure) and gross, with workerd's
 * part, and where the isolate's time goes in the profiled scenarios (bench/edge_profile.ts).
 */
import type { ProfileSummary } from "./edge_profile.ts";

export type EdgeRow = Record<string, string | number | boolean | null | readonly number[]>;

export interface EdgeData {
  readonly rows: readonly EdgeRow[];
  readonly connections: number;
  readonly durationS: number;
  readonly idleS?: number;
  readonly runs: number;
  readonly profiles?: Record<string, ProfileSummary | unknown>;
}

const signed = (v: unknown) => `${Number(v) >= 0 ? "+" : ""}${String(v)}`;

function profileLines(profiles: Record<string, ProfileSummary | unknown>): string[] {
  const summaries = Object.entries(profiles).filter(
    (e): e is [string, ProfileSummary] => typeof e[1] === "object" && e[1] !== null && "parts" in e[1],
  );
  if (summaries.length === 0) return [];
  const out = [
    "Where the isolate's time goes: one more run of each of these scenarios with the Worker isolate sampled through its inspector (not counted above). The Durable Object runs in the same local workerd process and the same isolate as the Worker, so its CPU is part of the figures above: a sample is **the object's** when its stack passes through the object's classes (src/object/limiter.ts, delegate.ts), **the isolate's** otherwise (the bare Worker has no module markers: all of it counts as wrangler's wrapper); busy samples are over a whole 10 s run, so compare them per request with the scenario's req/s; `(program)` is the runtime's native work the sampler cannot place, GC the one heap's. Shares of the busy samples; self time by source file (a runtime builtin, such as `fetch`, a timer or a storage write, counts in the file that called it):",
    "",
    "| scenario | busy samples | isolate | object | native | GC | files with the most self time |",
    "|---|---:|---:|---:|---:|---:|---|",
  ];
  for (const [scenario, p] of summaries) {
    const files = p.files
      .slice(0, 8)
      .map((f) => `${f.file} ${f.share}%${f.part === "object" ? " (object)" : ""}`)
      .join(", ");
    out.push(
      `| ${scenario} | ${p.busySamples} | ${p.parts.isolate}% | ${p.parts.object}% | ${p.parts.program}% | ${p.parts.gc}% | ${files} |`,
    );
  }
  out.push("");
  return out;
}

export function edgeSection(d: EdgeData): string[] {
  const net = d.rows.every((r) => r.netCpuMsPerRequest !== undefined);
  const out = [
    `Each scenario a real \`wrangler dev\` (a temp copy, its own free port and inspector port) in front of one real local origin (a Node HTTP server in the bench process, counting what reaches it): the **bare forwarding Worker** (\`fetch(origin + path)\`, nothing else) and Sluice with \`UPSTREAM_URL\` set to the same origin. autocannon, ${d.connections} connections, ${d.durationS} s, one client IP (a rule on the address is one hot key); scenarios interleaved, median of ${d.runs} run(s). **Server CPU** is the user + system time of wrangler dev's process group (workerd, node, esbuild) over the measured run, per request answered: far steadier than req/s on a shared machine. ${net ? `**Net** is the same less what the group burns with no request in flight (measured for ${d.idleS ?? "a few"} s before and after the run, the lower rate taken; about 80-115 ms of CPU a second: wrangler dev's own timers and watchers), which the gross figure charges to each request in inverse proportion to the scenario's throughput. The goals are read on the net figure; ` : ""}workerd's part is the runtime alone (the Worker, the object, their I/O; the rest is wrangler's node proxy). Goals (issue 38): one global rule at most +0.3 ms over the bare Worker, no matching rule +0.1 ms.`,
    "",
  ];
  if (net) {
    out.push(
      "| scenario | net CPU ms / request | over bare, ms | vs bare | goal | gross CPU ms / request | gross vs bare | workerd ms / request | workerd over bare | req/s | p50 ms | p99 ms | non-2xx | origin hits / request | object calls / request |",
      "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    );
    for (const r of d.rows)
      out.push(
        `| ${r.scenario} | ${r.netCpuMsPerRequest} | ${signed(r.netOverBareMs)} | ${r.netRatioToBare}x | ${r.goalOverBareMs === null ? "-" : `+${r.goalOverBareMs} ms: ${r.meetsGoal ? "met" : "**missed**"}`} | ${r.serverCpuMsPerRequest} | ${r.cpuRatioToBare}x | ${r.workerdCpuMsPerRequest} | ${signed(r.workerdOverBareMs)} | ${r.requestsPerS} | ${r.p50Ms} | ${r.p99Ms} | ${r.non2xx} | ${r.originPerRequest} | ${r.objectCallsPerRequest} |`,
      );
  } else {
    out.push(
      "| scenario | server CPU ms / request | over bare, ms | vs bare | goal | req/s | p50 ms | p99 ms | non-2xx | origin hits / request | object calls / request |",
      "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    );
    for (const r of d.rows)
      out.push(
        `| ${r.scenario} | ${r.serverCpuMsPerRequest} | ${signed(r.cpuOverBareMs)} | ${r.cpuRatioToBare}x | ${r.goalOverBareMs === null ? "-" : `+${r.goalOverBareMs} ms: ${r.meetsGoal ? "met" : "missed"}`} | ${r.requestsPerS} | ${r.p50Ms} | ${r.p99Ms} | ${r.non2xx} | ${r.originPerRequest} | ${r.objectCallsPerRequest} |`,
      );
  }
  out.push("", ...profileLines(d.profiles ?? {}));
  return out;
}
