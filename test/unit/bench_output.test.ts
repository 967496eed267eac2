/**
 * `npm run bench` leaves the committed figures alone: without `--publish` the report goes to bench/out/ (ignored by
 * git), and quick figures are never published.
 */
import { spawnSync } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { describe, expect, it } from "vitest";

const run = (...args: string[]) =>
  spawnSync(process.execPath, ["--import", "tsx", "bench/report.ts", ...args], { encoding: "utf8" });

describe("bench output", () => {
  it("writes the report under bench/out/ by default, leaving BENCHMARKS.md as committed", () => {
    const published = readFileSync("BENCHMARKS.md", "utf8");
    const before = Date.now();
    const result = run();
    expect(result.status, result.stderr).toBe(0);
    expect(result.stderr).toContain("wrote bench/out/BENCHMARKS.md");
    expect(statSync("bench/out/BENCHMARKS.md").mtimeMs).toBeGreaterThanOrEqual(before - 1000);
    expect(readFileSync("bench/out/BENCHMARKS.md", "utf8")).toContain("from bench/out/results/*.json");
    expect(readFileSync("BENCHMARKS.md", "utf8")).toBe(published);
    expect(readFileSync(".gitignore", "utf8").split("\n")).toContain("bench/out/");
  });

  it("refuses to publish a quick run", () => {
    const result = run("--quick", "--publish");
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("--quick figures are not published");
  });
});
