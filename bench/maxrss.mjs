// Preloaded (`node --import ./bench/maxrss.mjs ...`) into a benchmarked command: on exit, writes the process's peak
// resident set size in bytes to the file named by SLUICE_MAXRSS_FILE. On Linux it is VmHWM from /proc/self/status,
// the high-water mark of this program's own memory: getrusage's maxRSS also counts the parent's pages at the fork
// before exec, so a large benchmark process would inflate every child's figure.
import { readFileSync, writeFileSync } from "node:fs";

const file = process.env.SLUICE_MAXRSS_FILE;

function peakBytes() {
  try {
    const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"))?.[1];
    if (kb !== undefined) return Number(kb) * 1024;
  } catch {
    // Not Linux: fall back to getrusage below.
  }
  return process.resourceUsage().maxRSS * 1024;
}

if (file !== undefined) process.on("exit", () => writeFileSync(file, String(peakBytes())));
