// Preloaded (`node --import ./bench/maxrss.mjs ...`) into a benchmarked command: on exit, writes the process's peak
// resident set size in bytes to the file named by SLUICE_MAXRSS_FILE.
import { writeFileSync } from "node:fs";

const file = process.env.SLUICE_MAXRSS_FILE;
if (file !== undefined) {
  process.on("exit", () => writeFileSync(file, String(process.resourceUsage().maxRSS * 1024)));
}
