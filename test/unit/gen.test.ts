/** `sluice gen`: patterns, exact lines, seeded Poisson determinism, and the command's errors. */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { formatTrace, generateTrace, parseGenArgs, parsePattern } from "../../src/cli/gen.ts";
import { parseTime } from "../../src/cli/time_flag.ts";
import { runCli } from "../support/io.ts";

const gen = (...args: string[]) => runCli(["gen", ...args]);

describe("parseTime: the rule files' duration grammar, plus integer ms and clock times", () => {
  it.each([
    ["2500", 2500],
    ["0", 0],
    ["2500ms", 2500],
    ["500ms", 500],
    ["1min", 60_000],
    ["min", 60_000],
    ["3s", 3000],
    ["s", 1000],
    ["d", 86_400_000],
    ["12:00:50", 43_250_000],
    ["12:01", 43_260_000],
    ["12:00:50.25", 43_250_250],
    ["00:00:00.001", 1],
  ])("%s is %i ms", (text, ms) => {
    expect(parseTime(text)).toEqual({ ms });
  });

  // Fractions ("2.5s") and "0s" are not durations in rule files, so not here either (one grammar everywhere).
  it.each(["1.5ms", "2.5s", "0s", "01s", "2.0001s", "25:00:00", "12:60", "-1", "1 s", "5 min", "2x", ""])(
    "rejects %j",
    (text) => {
      expect(parseTime(text)).toHaveProperty("error");
    },
  );
});

describe("generateTrace", () => {
  it("writes the Free-plan burst exactly: 25 at 0, 8 at 0.5 s, 1 at 2.5 s", async () => {
    const r = await gen("--burst", "25@0", "--burst", "8@500ms", "--burst", "1@2500ms");
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    const expected = ["t_ms,key,cost", ...Array(25).fill("0,a,1"), ...Array(8).fill("500,a,1"), "2500,a,1"];
    expect(r.stdout).toBe(`${expected.join("\n")}\n`);
  });

  it("spaces a constant rate evenly: 10/s from 12:00:50 to 12:01:10 is 200 requests, 100 ms apart, end excluded", () => {
    const parsed = parseGenArgs(["--constant", "10/s,12:00:50,12:01:10"]);
    if (parsed === "help" || "error" in parsed) throw new Error("unexpected");
    const lines = generateTrace(parsed.spec);
    expect(lines).toHaveLength(200);
    expect(lines[0]).toEqual({ tMs: 43_250_000, key: "a", cost: 1 });
    expect(lines[1]!.tMs).toBe(43_250_100);
    expect(lines[199]!.tMs).toBe(43_269_900);
  });

  it("floors exact rational spacing for rates that do not divide the period: 7/3s", () => {
    const parsed = parseGenArgs(["--constant", "7/3s,0,3s"]);
    if (parsed === "help" || "error" in parsed) throw new Error("unexpected");
    expect(generateTrace(parsed.spec).map((l) => l.tMs)).toEqual([0, 428, 857, 1285, 1714, 2142, 2571]);
  });

  it("runs each pattern for every key, sorted by time, equal times in pattern then key order", async () => {
    const r = await gen("--constant", "2/s,0,1s", "--burst", "2@500,cost=10,key=bulk", "--keys", "2", "--key", "m");
    expect(r.stdout).toBe("t_ms,key,cost\n0,m-1,1\n0,m-2,1\n500,m-1,1\n500,m-2,1\n500,bulk,10\n500,bulk,10\n");
  });

  it("Poisson arrivals are deterministic for a seed, differ across seeds, and have about the right mean", () => {
    const spec = (seed: string) => {
      const parsed = parseGenArgs(["--poisson", "50/s,0,100s", "--seed", seed]);
      if (parsed === "help" || "error" in parsed) throw new Error("unexpected");
      return parsed.spec;
    };
    const a = formatTrace(generateTrace(spec("7")));
    expect(formatTrace(generateTrace(spec("7")))).toBe(a);
    expect(formatTrace(generateTrace(spec("8")))).not.toBe(a);
    const n = generateTrace(spec("7")).length;
    // 5000 expected; the standard deviation is sqrt(5000) ≈ 71.
    expect(n).toBeGreaterThan(4700);
    expect(n).toBeLessThan(5300);
    const times = generateTrace(spec("7")).map((l) => l.tMs);
    expect(times).toEqual([...times].sort((x, y) => x - y));
    expect(Math.max(...times)).toBeLessThan(100_000);
  });

  it("Poisson arrivals for many keys: one stream at N x rate, each key about its own rate, keys drawn uniformly", () => {
    const parsed = parseGenArgs(["--poisson", "50/s,0,100s", "--keys", "10", "--seed", "3"]);
    if (parsed === "help" || "error" in parsed) throw new Error("unexpected");
    const lines = generateTrace(parsed.spec);
    const perKey = new Map<string, number>();
    for (const l of lines) perKey.set(l.key, (perKey.get(l.key) ?? 0) + 1);
    expect([...perKey.keys()].sort()).toEqual(Array.from({ length: 10 }, (_, i) => `a-${i + 1}`).sort());
    // 5000 expected per key (sd about 71), 50,000 in all (sd about 224): within 5 sd.
    for (const n of perKey.values()) expect(Math.abs(n - 5000)).toBeLessThan(360);
    expect(Math.abs(lines.length - 50_000)).toBeLessThan(1120);
    const times = lines.map((l) => l.tMs);
    expect(times).toEqual([...times].sort((x, y) => x - y));
    expect(times.at(-1)!).toBeLessThan(100_000);
  });

  it("a constant rate over many keys repeats each time for every key in order, as many times as it falls there", () => {
    const parsed = parseGenArgs(["--constant", "2500/s,0,2ms", "--keys", "2", "--key", "k"]);
    if (parsed === "help" || "error" in parsed) throw new Error("unexpected");
    // 2.5 arrivals per ms: arrivals 0, 1, 2 fall on 0 ms, 3 and 4 on 1 ms.
    expect(generateTrace(parsed.spec).map((l) => `${l.tMs} ${l.key}`)).toEqual([
      ...["0 k-1", "0 k-1", "0 k-1", "0 k-2", "0 k-2", "0 k-2"],
      ...["1 k-1", "1 k-1", "1 k-2", "1 k-2"],
    ]);
  });

  it("pins the first Poisson arrivals of seed 1, so a change of generator shows up", async () => {
    const r = await gen("--poisson", "10/s,0,1s");
    expect(r.stdout.split("\n").slice(0, 4)).toEqual(["t_ms,key,cost", "83,a,1", "105,a,1", "423,a,1"]);
  });

  it("writes to --out", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-gen-"));
    const out = join(dir, "t.csv");
    const r = await gen("--burst", "2@1s", "--out", out);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("");
    expect(readFileSync(out, "utf8")).toBe("t_ms,key,cost\n1000,a,1\n1000,a,1\n");
  });
});

describe("parsePattern", () => {
  it.each([
    ["burst", "25", "expected COUNT@AT"],
    ["burst", "0@1s", "COUNT must be a positive integer"],
    ["burst", "3@soon", "AT must be a time"],
    ["constant", "10/s,0", "expected RATE,FROM,TO"],
    ["constant", "10/x,0,1s", "RATE"],
    ["constant", "10/s,2s,1s", "TO (1s) must be after FROM (2s)"],
    ["poisson", "10/s,0,1s,cost=0", "cost must be a positive integer"],
    ["poisson", "10/s,0,1s,weight=2", 'unknown option "weight="'],
    ["burst", "1@0,key=", "a key may not be empty"],
  ] as const)("--%s %s: %s", (kind, text, message) => {
    const p = parsePattern(kind, text);
    expect("error" in p && p.error).toContain(message);
  });
});

describe("sluice gen errors", () => {
  it.each([
    [["--burst", "1@0", "--rate", "3"], "unknown option --rate"],
    [[], "give at least one pattern"],
    [["--burst", "1@0", "extra"], 'unexpected argument "extra"'],
    [["--burst", "1@0", "--keys", "0"], "--keys must be a positive integer"],
    [["--burst", "1@0", "--seed", "x"], "--seed must be an integer"],
    [["--burst", "1@0", "--key", "a,b"], "--key: a key may not contain commas"],
    [["--constant", "10/s,0"], "--constant 10/s,0: expected RATE,FROM,TO"],
    [["--burst", "1@0", "--seed", "1", "--seed", "2"], "--seed given more than once"],
  ])("%j exits 2 with %j", async (args, message) => {
    const r = await gen(...args);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(`sluice gen: ${message}`);
    expect(r.stderr).toContain("Usage: sluice gen");
  });

  it("refuses a runaway trace before making it", async () => {
    const r = await gen("--constant", "1000/s,0,1h", "--max-lines", "1000");
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("about 3600000 lines, over --max-lines 1000");
  });

  it("prints its help with --help and exits 0", async () => {
    const r = await gen("--help");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Usage: sluice gen");
  });
});
