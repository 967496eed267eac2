/**
 * A real `wrangler dev` for the benchmarks and the soak, never touching the working tree: the project (src, bin,
 * wrangler.toml, package.json) is copied to a temp dir with node_modules linked, the given rules are written to its
 * rules/ and compiled there, and wrangler dev runs there on a free 127.0.0.1 port, offline, in its own process group
 * (wrangler, esbuild and workerd together), stopped by signalling that group: the process it started, by id.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { OFFLINE_ENV } from "../test/support/wrangler_dev.ts";
import { ROOT } from "./common.ts";

// Shared with the end-to-end tests: one copy of each (test/support/wrangler_dev.ts).
export { dropBuildStep, freePort, projectCopy } from "../test/support/wrangler_dev.ts";
/** Offline and quiet: no Request.cf fetch, no telemetry, no update check. */
export const WRANGLER_ENV = OFFLINE_ENV;

export const WRANGLER_BIN = join(ROOT, "node_modules", ".bin", "wrangler");

/** The processes in group `pgid` (wrangler dev's: node, esbuild, workerd), from /proc: pid, name, /proc/<pid>/stat fields. */
function groupProcesses(pgid: number): { pid: string; comm: string; fields: string[] }[] {
  const found = [];
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const fields = stat.slice(close + 2).split(" "); // state, ppid, pgrp, ...
      if (Number(fields[2]) === pgid) found.push({ pid, comm, fields });
    } catch {
      // the process ended between readdir and read
    }
  }
  return found;
}

/** RSS of the processes in group `pgid` (wrangler dev's: node, esbuild, workerd), from /proc, kB. */
export function groupRss(pgid: number): { workerdKb: number; totalKb: number } {
  let workerdKb = 0;
  let totalKb = 0;
  for (const { pid, comm } of groupProcesses(pgid)) {
    try {
      const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
      const kb = rss === null ? 0 : Number(rss[1]);
      totalKb += kb;
      if (comm.startsWith("workerd")) workerdKb += kb;
    } catch {
      // the process ended between readdir and read
    }
  }
  return { workerdKb, totalKb };
}

/**
 * What workerd's RSS is made of, kB, from /proc/<pid>/status of the group's workerd processes: anonymous memory (its
 * heaps: V8's, SQLite's, the runtime's own allocations), file-backed pages it maps, and shared memory (tmpfs files it
 * maps, such as a SQLite database's `-shm` index when the state lives on /dev/shm).
 */
export function workerdRssParts(pgid: number): { anonKb: number; fileKb: number; shmemKb: number } {
  const parts = { anonKb: 0, fileKb: 0, shmemKb: 0 };
  for (const { pid, comm } of groupProcesses(pgid)) {
    if (!comm.startsWith("workerd")) continue;
    try {
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
      parts.anonKb += kb("RssAnon");
      parts.fileKb += kb("RssFile");
      parts.shmemKb += kb("RssShmem");
    } catch {
      // the process ended between readdir and read
    }
  }
  return parts;
}

/**
 * The times wrangler dev (re)loaded its local runtime, from its debug logs (one file per session, entries headed
 * `--- <ISO time> <level>`): each session's first load is its start; any later one is a reload mid-run, which answers
 * requests in flight with "worker restarted mid-request". With each, the log entries just before it (what set it off).
 */
export function wranglerReloads(logDir: string): { atMs: number; file: string; before: string[] }[] {
  const reloads: { atMs: number; file: string; before: string[] }[] = [];
  if (!existsSync(logDir)) return reloads;
  for (const file of readdirSync(logDir).sort()) {
    const entries = readFileSync(join(logDir, file), "utf8").split(/^--- /m);
    let loads = 0;
    entries.forEach((entry, i) => {
      if (!entry.includes('"type":"reloadComplete"')) return;
      if (loads++ === 0) return; // the session's start
      const before = entries
        .slice(Math.max(0, i - 6), i)
        .map((e) => e.split("\n").slice(0, 2).join(" ").slice(0, 200))
        .filter((e) => e.trim() !== "");
      reloads.push({ atMs: Date.parse(entry.slice(0, 24)), file, before });
    });
  }
  return reloads;
}

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on Linux). */
const TICKS_PER_S = 100;

/**
 * CPU time the processes in group `pgid` have used so far (user + system, their own threads), ms. The difference over a
 * run is the server's CPU for that run: on a machine shared with other work it is far steadier than wall-clock
 * throughput, which depends on how much CPU the others leave.
 */
export function groupCpuMs(pgid: number, only?: string): number {
  let ticks = 0;
  // utime and stime are fields 14 and 15 of /proc/<pid>/stat: 11 and 12 after the name.
  for (const { comm, fields } of groupProcesses(pgid))
    if (only === undefined || comm === only) ticks += Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / TICKS_PER_S;
}

/** workerd's part of `groupCpuMs` (the runtime, apart from wrangler's node process and esbuild), ms. */
export const workerdCpuMs = (pgid: number): number => groupCpuMs(pgid, "workerd");

/**
 * Start `wrangler dev` in `dir` on `port` with extra arguments, the echo origin answering admitted requests; its own
 * process group, whose id is its pid.
 */
export function startWrangler(
  dir: string,
  port: number,
  extra: readonly string[],
  stdio: "ignore" | "pipe" = "ignore",
  env: Record<string, string> = {},
): ChildProcess {
  return spawn(
    WRANGLER_BIN,
    ["dev", "--ip", "127.0.0.1", "--port", String(port), "--var", "ECHO_ORIGIN:true", ...extra],
    {
      cwd: dir,
      detached: true,
      stdio: ["ignore", stdio, stdio],
      env: { ...process.env, ...WRANGLER_ENV, ...env },
    },
  );
}

export async function waitUp(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited with ${child.exitCode}`);
    try {
      await (await fetch(url, { signal: AbortSignal.timeout(2_000) })).arrayBuffer();
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100)); // not listening yet
    }
  }
  throw new Error(`wrangler dev did not answer on ${url} within ${timeoutMs} ms`);
}

/** Send `sig` to the process group `pgid`; `false` when the group is gone. */
export function signalGroup(pgid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, sig);
    return true;
  } catch {
    return false; // ESRCH: the group is gone
  }
}

/** SIGTERM wrangler's process group, then SIGKILL it if it is still there after 3 s (wrangler may ignore TERM). */
export async function killGroup(pgid: number, child: ChildProcess): Promise<void> {
  if (!signalGroup(pgid, "SIGTERM")) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 3_000))]);
  await new Promise((resolve) => setTimeout(resolve, 200));
  signalGroup(pgid, "SIGKILL"); // whatever of the group is left (workerd)
}

/** The `ws` client (installed with miniflare and wrangler, which depend on it), for the devtools protocol. */
interface DevtoolsSocket {
  on(event: "open" | "error" | "close", listener: (e?: unknown) => void): void;
  on(event: "message", listener: (data: unknown) => void): void;
  send(data: string): void;
  close(): void;
}

/** What `inspectHeap` reads through one devtools connection (wrangler dev's inspector proxy takes one at a time). */
export interface HeapInspector {
  heapMb: () => Promise<number | null>;
  heapTotalMb: () => number | null;
  retainedMb: () => Promise<number | null>;
  /** A heap snapshot (devtools .heapsnapshot, after a full collection) written to `path`; false if not taken. */
  snapshot: (path: string, timeoutMs?: number) => Promise<boolean>;
  close: () => void;
}

interface DevtoolsMessage {
  id?: number;
  method?: string;
  params?: { chunk?: string };
  result?: { usedSize?: number; totalSize?: number };
}

/**
 * The JS heap of wrangler dev's Worker isolate (the Worker and its Durable Objects, one isolate), read through its
 * devtools inspector (`--inspector-port`): what the Worker's own code keeps, apart from the runtime's native memory
 * that RSS also counts. `null` from `heapMb` when the inspector cannot be reached; `heapTotalMb`: V8's whole heap at
 * the last reading (what it holds from the system, used or not). wrangler dev's inspector proxy closes a second
 * devtools connection at once ("only one can be connected at a time"), so snapshots go through this one too.
 */
export async function inspectHeap(inspectorPort: number): Promise<HeapInspector> {
  const none: HeapInspector = {
    heapMb: async () => null,
    heapTotalMb: () => null,
    retainedMb: async () => null,
    snapshot: async () => false,
    close: () => {},
  };
  try {
    const WebSocket = createRequire(import.meta.url)("ws") as new (
      url: string,
      options: { headers: Record<string, string>; maxPayload?: number },
    ) => DevtoolsSocket;
    const json = await fetch(`http://127.0.0.1:${inspectorPort}/json`, { signal: AbortSignal.timeout(10_000) });
    const targets = (await json.json()) as {
      webSocketDebuggerUrl: string;
    }[];
    const url = targets[0]?.webSocketDebuggerUrl;
    if (url === undefined) return none;
    // The inspector proxy takes a local Origin only.
    const socket = new WebSocket(url, { headers: { Origin: "http://localhost" } });
    // Bounded: an inspector that neither opens nor fails held a whole soak before its load began (2026-12-01, load
    // average 15): without it the heap is not read (`null`), and the run goes on.
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("inspector did not open in 10 s")), 10_000);
      socket.on("open", () => {
        clearTimeout(timer);
        resolve(undefined);
      });
      socket.on("error", (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
    return devtoolsHeap(socket);
  } catch {
    return none;
  }
}

/** `inspectHeap`'s readings over an open devtools socket. */
function devtoolsHeap(socket: DevtoolsSocket): HeapInspector {
  let id = 0;
  const waiting = new Map<number, (message: DevtoolsMessage | undefined) => void>();
  /** The chunks of the heap snapshot being taken, if one is. */
  let chunks: string[] | null = null;
  /** V8's heap as allocated from the system (used and free), MB, at the last reading. */
  let totalMb: number | null = null;
  socket.on("message", (data) => {
    const message = JSON.parse(String(data)) as DevtoolsMessage;
    if (message.method === "HeapProfiler.addHeapSnapshotChunk") chunks?.push(message.params?.chunk ?? "");
    if (message.id !== undefined) waiting.get(message.id)?.(message);
    if (message.id !== undefined) waiting.delete(message.id);
  });
  let open = true;
  socket.on("close", () => {
    open = false;
    for (const answer of waiting.values()) answer(undefined);
  });
  /** One devtools call; its answer, or undefined if the socket closed or it took over `timeoutMs`. */
  const call = (method: string, timeoutMs: number, params?: object) =>
    new Promise<DevtoolsMessage | undefined>((resolve) => {
      if (!open) return resolve(undefined);
      const i = ++id;
      const timer = setTimeout(() => resolve(undefined), timeoutMs);
      waiting.set(i, (message) => {
        clearTimeout(timer);
        resolve(message);
      });
      socket.send(JSON.stringify({ id: i, method, params }));
    });
  const usage = async () => {
    const result = (await call("Runtime.getHeapUsage", 2_000))?.result;
    totalMb = result?.totalSize === undefined ? null : result.totalSize / 1_048_576;
    return result?.usedSize === undefined ? null : result.usedSize / 1_048_576;
  };
  return {
    heapMb: usage,
    heapTotalMb: () => totalMb,
    /**
     * The heap still in use after a full garbage collection (`HeapProfiler.collectGarbage`): what the Worker's code
     * and its objects' records actually retain, without the garbage a reading between collections also counts. The
     * collection pauses the isolate for a moment; `null` when it could not be read.
     */
    retainedMb: async () => ((await call("HeapProfiler.collectGarbage", 10_000)) === undefined ? null : usage()),
    snapshot: async (path, timeoutMs = 120_000) => {
      if (chunks !== null) return false; // one at a time
      chunks = [];
      try {
        // Without `enable` first, workerd never answers the snapshot; it answers after the last chunk.
        await call("HeapProfiler.enable", 10_000);
        const done = await call("HeapProfiler.takeHeapSnapshot", timeoutMs, { reportProgress: false });
        if (done === undefined) return false;
        writeFileSync(path, chunks.join(""));
        return true;
      } finally {
        chunks = null;
      }
    },
    close: () => socket.close(),
  };
}

/**
 * Sample the Worker isolate's CPU through its devtools inspector (`Profiler.start` .. `Profiler.stop`) while `during`
 * runs: the per-request path's profile, in the devtools format (a .cpuprofile). `null` when the inspector cannot be
 * reached.
 */
export async function profileIsolate(inspectorPort: number, during: () => Promise<void>): Promise<unknown | null> {
  const WebSocket = createRequire(import.meta.url)("ws") as new (
    url: string,
    options: { headers: Record<string, string> },
  ) => DevtoolsSocket;
  const targets = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()) as {
    webSocketDebuggerUrl: string;
  }[];
  const url = targets[0]?.webSocketDebuggerUrl;
  if (url === undefined) {
    await during();
    return null;
  }
  const socket = new WebSocket(url, { headers: { Origin: "http://localhost" } });
  await new Promise((resolve, reject) => {
    socket.on("open", () => resolve(undefined));
    socket.on("error", (error) => reject(error));
  });
  const waiting = new Map<number, (result: unknown) => void>();
  socket.on("message", (data) => {
    const message = JSON.parse(String(data)) as { id?: number; result?: unknown };
    if (message.id !== undefined) waiting.get(message.id)?.(message.result);
  });
  let id = 0;
  const call = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<unknown>((resolve) => {
      const i = ++id;
      waiting.set(i, resolve);
      socket.send(JSON.stringify({ id: i, method, params }));
    });
  try {
    await call("Profiler.enable");
    await call("Profiler.setSamplingInterval", { interval: 200 });
    await call("Profiler.start");
    await during();
    const result = (await call("Profiler.stop")) as { profile?: unknown } | undefined;
    return result?.profile ?? null;
  } finally {
    socket.close();
  }
}
