/** `sluice compare`: the stats on the two figures of docs/examples/, the table, the SVG, and the command's errors. */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { generateTrace, parseGenArgs } from "../../src/cli/gen.ts";
import { compareRules, MAX_MARK_BINS, MAX_TRACK_BINS } from "../../src/replay/accumulate.ts";
import { formatComparison, type TraceLine } from "../../src/replay/run.ts";
import { loadRules } from "../../src/rules/load.ts";
import type { AlgorithmParams, ResolvedRule } from "../../src/rules/types.ts";
import { boundaries, defaultRange, renderSvg } from "../../src/viz/svg.ts";
import { xmlProblems } from "../fixtures/compare/xml.ts";
import { runCli, runCliIn, scratchRules } from "../support/io.ts";
import { fixedWindow, slidingCounter, slidingLog, tokenBucket } from "../support/params.ts";

const RULES = "test/fixtures/compare/rules.yaml";

function rulesOf(file: string): ResolvedRule[] {
  const loaded = loadRules([file]);
  expect(loaded.errors).toEqual([]);
  return loaded.rules;
}

function trace(...args: string[]): TraceLine[] {
  const parsed = parseGenArgs(args);
  if (parsed === "help" || "error" in parsed) throw new Error(`bad gen args ${args.join(" ")}`);
  return generateTrace(parsed.spec);
}

const freeBurst = () =>
  compareRules(
    rulesOf("docs/examples/free-burst.yaml"),
    trace("--burst", "25@0", "--burst", "8@500ms", "--burst", "1@2500ms"),
  );
const boundary = () =>
  compareRules(rulesOf("docs/examples/boundary.yaml"), trace("--constant", "10/s,12:00:50,12:01:10"));

describe("the figures of docs/examples/, computed by the core", () => {
  it("Free-plan burst: the token bucket admits 20 + 5 + 1 = 26 of 34", () => {
    const c = freeBurst();
    const lane = c.lanes[0]!;
    expect(lane.stats).toMatchObject({ requests: 34, admitted: 26, denied: 8, delayed: 0, errors: 0 });
    const admittedAt = (t: number) =>
      lane.marks.filter((m) => m.firstMs === t && m.outcome === "allowed").reduce((n, m) => n + m.count, 0);
    expect([admittedAt(0), admittedAt(500), admittedAt(2500)]).toEqual([20, 5, 1]);
    expect(lane.stats.firstDenial).toEqual({ tMs: 0, key: "a" });
    // Most admitted in any 1 s (the rate's period): the 20 at 0 s and the 5 at 0.5 s.
    expect(lane.stats.peak).toEqual({ cost: 25, key: "a", startMs: 0 });
  });

  it("boundary burst: fixed 200, log 100, counter and bucket as the exact arithmetic says (about 116 and 133)", () => {
    const c = boundary();
    const admitted = Object.fromEntries(c.lanes.map((l) => [l.rule.id, l.stats.admitted]));
    // Independent closed forms. Sliding counter: the k-th request after 12:01:00 (k = 0..99, e = 100k ms) sees
    // estimate = 100 × (60000 − e)/60000 + curr, admitted iff curr + 1 <= e/600: so curr ends at floor(99/6) = 16.
    // Token bucket at 100/min from full: admitted = floor(100 + 19.9 s × 100/60 s) = 133 (it never runs dry early).
    const counterExpected = 100 + Math.floor(9900 / 600);
    const bucketExpected = Math.floor(100 + (19_900 * 100) / 60_000);
    expect(admitted).toEqual({
      "fixed-window": 200,
      "sliding-log": 100,
      "sliding-counter": counterExpected,
      "token-bucket": bucketExpected,
    });
    expect(counterExpected).toBe(116);
    expect(bucketExpected).toBe(133);
    expect(Math.abs(admitted["sliding-counter"]! - 116)).toBeLessThanOrEqual(1);
    expect(Math.abs(admitted["token-bucket"]! - 133)).toBeLessThanOrEqual(1);
    // Everything is inside one 60 s span, so the peak is the total; the first denials fall at or after 12:01:00.
    for (const lane of c.lanes) expect(lane.stats.peak?.cost ?? 0).toBe(lane.stats.admitted);
    expect(c.lanes.map((l) => l.stats.firstDenial?.tMs ?? null)).toEqual([null, 43_260_000, 43_260_000, 43_261_900]);
  });

  it("prints one row per rule with a header that says how to read it", () => {
    const text = formatComparison(boundary(), "boundary.csv", "clock");
    expect(text).toContain("trace boundary.csv: 200 requests, 1 key, 12:00:50.000 to 12:01:09.900");
    expect(text).toContain("its rate's period for rate algorithms");
    const rows = text.split("\n").filter((l) => /^(fixed|sliding|token)-/.test(l));
    expect(rows.map((r) => r.split(/\s{2,}/))).toEqual([
      ["fixed-window", "fixed_window 100 per 60 s", "200", "0", "0", "200 in 60 s", "-"],
      ["sliding-log", "sliding_log 100 per 60 s", "100", "100", "0", "100 in 60 s", "12:01:00.000"],
      ["sliding-counter", "sliding_counter 100 per 60 s", "116", "84", "0", "116 in 60 s", "12:01:00.000"],
      ["token-bucket", "token_bucket 100/min, burst 100", "133", "67", "0", "133 in 60 s", "12:01:01.900"],
    ]);
  });
});

describe("compareRules", () => {
  it("counts delayed (leaky_queue) as admitted, and errors for impossible costs", () => {
    const c = compareRules(rulesOf(RULES), [
      ...trace("--burst", "25@0"),
      { tMs: 0, key: "a", cost: 50 },
      { tMs: 10, key: "b", cost: 1 },
    ]);
    const [tb, queue, window] = c.lanes;
    expect(tb!.stats).toMatchObject({ admitted: 21, denied: 5, delayed: 0, errors: 1 });
    expect(queue!.stats).toMatchObject({ admitted: 22, denied: 4, delayed: 20, errors: 1 });
    const delayed = queue!.marks.filter((m) => m.outcome === "delayed");
    expect(delayed.flatMap((m) => m.releasesMs.map((r) => r - m.firstMs))).toEqual(
      Array.from({ length: 20 }, (_, i) => (i + 1) * 100),
    );
    expect(window!.stats).toMatchObject({ admitted: 6, denied: 20, errors: 1 });
    expect(c.keys).toBe(2);
    expect(c.stateKey).toBe("a");
    // The state track follows key "a" only: its 26 requests at one instant are one step, from 20 tokens to 0.
    expect(tb!.track).toEqual([
      {
        firstMs: 0,
        lastMs: 0,
        points: [
          { tMs: 0, level: 20 },
          { tMs: 0, level: 0 },
        ],
        endState: expect.anything(),
      },
    ]);
  });

  it("finds the peak over half-open spans, per key", () => {
    const tb = rulesOf(RULES).slice(0, 1); // token_bucket: its peak span is its rate's period, 1 s
    const peak = (lines: TraceLine[]) => compareRules(tb, lines).lanes[0]!.stats.peak;
    const l = (tMs: number, key = "a", cost = 1) => ({ tMs, key, cost });
    expect(peak([l(0), l(999), l(1000), l(1000)])).toEqual({ cost: 3, key: "a", startMs: 999 });
    expect(peak([l(0, "a"), l(1, "b", 5), l(2, "a")])).toEqual({ cost: 5, key: "b", startMs: 1 });
    expect(peak([])).toBeNull();
  });

  it("keeps a long trace's picture bounded: binned marks that still add up, and a thinned state track", () => {
    const busy = trace("--constant", "1000/s,0,300s", "--keys", "2");
    const c = compareRules(rulesOf(RULES), busy);
    for (const lane of c.lanes) {
      expect(lane.marks.length).toBeLessThanOrEqual(MAX_MARK_BINS);
      expect(lane.track.length).toBeLessThanOrEqual(MAX_TRACK_BINS);
      expect(lane.track.length).toBeGreaterThan(MAX_TRACK_BINS / 4);
      expect(lane.marks.reduce((n, m) => n + m.count, 0)).toBe(600_000);
      expect(lane.stats.admitted + lane.stats.denied + lane.stats.errors).toBe(600_000);
      for (const bin of lane.track) expect(bin.points.length).toBeLessThanOrEqual(16);
    }
    // The same decisions as on a short trace: token_bucket 10/s per key admits 20 + 10 per second after the first.
    expect(c.lanes[0]!.stats.admitted).toBe(2 * (20 + Math.floor((299_999 * 10) / 1000)));
  });
});

describe("window boundaries, as each algorithm says (level.window)", () => {
  const ruleOf = (params: AlgorithmParams) => ({ id: "r", ...params }) as ResolvedRule;
  it.each([
    ["fixed_window 60 s", fixedWindow(10, 60_000), [60_000, 120_000]],
    ["fixed_window month", fixedWindow(10, "month"), [Date.UTC(1970, 1, 1), Date.UTC(1970, 2, 1)]],
    ["sliding_counter 60 s", slidingCounter(10, 60_000, false, 4), [60_000, 120_000]],
    ["sliding_log: none", slidingLog(10, 60_000), []],
    ["token_bucket: none", tokenBucket(10, 1000, 20), []],
  ])("%s", (_, params, starts) => {
    // The first two window starts after 0 (the range reaches past March 1970, so a month has two as well).
    expect(boundaries(ruleOf(params), 0, 6e9).slice(0, 2)).toEqual(starts);
  });
});

describe("renderSvg", () => {
  const svgOf = () => {
    const c = boundary();
    return renderSvg(c, { title: "Boundary & co", style: "clock", ...defaultRange(c) });
  };

  it("is well-formed, deterministic and self-describing", () => {
    const svg = svgOf();
    expect(xmlProblems(svg)).toEqual([]);
    expect(svgOf()).toBe(svg);
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg" viewBox="0 0 1000 \d+"/);
    expect(svg).toContain('<title id="title">Boundary &amp; co</title>');
    for (const text of ["allowed", "denied", "window boundary", "time of day (UTC)", "12:01:00", "token-bucket"]) {
      expect(svg).toContain(`>${text}`);
    }
    // Requests 100 ms apart are ~2 px apart here, so each gets its own mark: 4 lanes × 200, plus 2 in the legend.
    expect(svg.match(/<use href="#mark-/g)?.length).toBe(802);
    expect(svg).not.toMatch(/NaN|Infinity|undefined/);
  });

  it("labels a burst at one instant with its count", () => {
    const c = freeBurst();
    const svg = renderSvg(c, { title: "Free", style: "seconds", fromMs: 0, toMs: 3500 });
    expect(xmlProblems(svg)).toEqual([]);
    for (const label of ["×20", "×5", "×3"]) expect(svg).toContain(`>${label}</text>`);
    expect(svg).toContain(">time (s)</text>");
    expect(svg).toContain(">3.5 s</text>");
  });

  it("draws a busy key's trace with bounded output (no argument-spread limits, four points per pixel at most)", () => {
    const busy = trace("--constant", "1000/s,0,300s");
    const c = compareRules(rulesOf(RULES).slice(0, 1), busy);
    const svg = renderSvg(c, { title: "busy", style: "seconds", ...defaultRange(c) });
    expect(xmlProblems(svg)).toEqual([]);
    expect(svg.length).toBeLessThan(200_000);
  });

  it("the XML check catches what it should", () => {
    expect(xmlProblems("<a><b></a></b>")).not.toEqual([]);
    expect(xmlProblems("<a>x & y</a>")).not.toEqual([]);
    expect(xmlProblems('<a x="1"/>')).toEqual([]);
  });
});

describe("sluice compare", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-compare-"));
  const traceFile = join(dir, "t.csv");
  writeFileSync(traceFile, "t_ms,key,cost\n0,a,1\n0,a,1\n");

  it("prints the table and writes the SVG", async () => {
    const svg = join(dir, "out.svg");
    const r = await runCli(["compare", "--rules", RULES, "--trace", traceFile, "--rule", "window", "--svg", svg]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("trace t.csv: 2 requests, 1 key, 0 s to 0 s");
    expect(r.stdout).toMatch(/window\s+fixed_window 5 per 1 s\s+2\s+0\s+0\s+2 in 1 s\s+-/);
    expect(r.stdout).not.toContain("tb ");
    expect(xmlProblems(readFileSync(svg, "utf8"))).toEqual([]);
  });

  it("draws a trace from standard input, charting its busiest key", async () => {
    const svg = join(dir, "stdin.svg");
    const r = await runCli(["compare", "--rules", RULES, "--rule", "tb", "--svg", svg], "0,a\n0,b\n1,b\n");
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("trace <stdin>: 3 requests, 2 keys");
    expect(readFileSync(svg, "utf8")).toContain("state lines follow key b");
  });

  it("reads the trace from standard input", async () => {
    const r = await runCli(["compare", "--rules", RULES, "--rule", "tb"], "0,a\n");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("trace <stdin>: 1 request, 1 key");
  });

  it.each([
    [["--rules", RULES, "--bogus"], "sluice compare: unknown option --bogus"],
    [["--rules", RULES, "--time", "hours"], '--time must be "seconds" or "clock", got "hours"'],
    [["--rules", RULES, "--from", "2s", "--to", "1s"], "--to must be after --from"],
    [["--rules", RULES, "--from", "later"], "--from must be a time"],
    [["--rules", RULES, "stray"], 'unexpected argument "stray"'],
  ])("usage error %j exits 2", async (args, message) => {
    const r = await runCli(["compare", ...args]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
    expect(r.stdout).toBe("");
  });

  it("an unknown rule id exits 2 and lists the rules", async () => {
    const r = await runCli(["compare", "--rules", RULES, "--trace", traceFile, "--rule", "nope"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`${RULES}: no rule with id "nope" (rules: tb, queue, window)\n`);
  });

  // Exit codes follow the CLI's one convention (1 invalid rules or input, 2 usage); compare used to exit 2 here.
  it("invalid rules exit 1 with the validator's messages", async () => {
    const r = await runCli(["compare", "--rules", "test/fixtures/compare/bad-rules.yaml", "--trace", traceFile]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("test/fixtures/compare/bad-rules.yaml: the top level must be a list of rules");
  });

  it("a malformed trace line exits 1 naming file and line, with nothing on standard output", async () => {
    const bad = join(dir, "bad.csv");
    writeFileSync(bad, "t_ms,key,cost\n0,a,1\nsoon,a,1\n");
    const r = await runCli(["compare", "--rules", RULES, "--trace", bad]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`${bad}:3: t_ms must be an integer number of milliseconds, got "soon"\n`);
    expect(r.stdout).toBe("");
  });

  it("a --key that is not in the trace exits 2", async () => {
    const r = await runCli(["compare", "--rules", RULES, "--trace", traceFile, "--key", "zz"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('no request with key "zz"');
  });

  it("prints its help with --help (or -h) and exits 0", async () => {
    const r = await runCli(["compare", "--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Usage: sluice compare [--rules PATH]...");
    expect(r.stdout).toContain("Exit status: 0 success; 1 invalid rules or invalid input");
    expect((await runCli(["compare", "-h"])).stdout).toBe(r.stdout);
  });

  it("reads rules/ when no --rules is given", async () => {
    const cwd = scratchRules({ "api.yaml": readFileSync("test/fixtures/cli/rules.yaml", "utf8") });
    const r = runCliIn(cwd, ["compare", "--rule", "tb"], "0,a\n");
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/tb\s+token_bucket/);
  });
});
