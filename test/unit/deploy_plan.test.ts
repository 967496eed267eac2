/** `sluice plan`: rule pairs with known flips, the fate of live state, and the command's output and exit codes. */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { generateTrace, parseGenArgs } from "../../src/cli/gen.ts";
import { changeOf, pairRules, stateFate } from "../../src/replay/deploy_plan.ts";
import { ReplayBuilder, totalFlips } from "../../src/replay/flips.ts";
import type { ResolvedRule } from "../../src/rules/types.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { xmlProblems } from "../fixtures/compare/xml.ts";
import { runCli, runCliIn, scratchRules } from "../support/io.ts";

function rules(yaml: string): ResolvedRule[] {
  const parsed = parseRules(yaml, "test.yaml");
  expect(parsed.errors).toEqual([]);
  return parsed.rules;
}

const rule = (body: string, id = "r") => `- id: ${id}\n  match: { identity: api_key }\n${body}`;
const TB = (burst: number) => rule(`  algorithm: token_bucket\n  rate: 10/s\n  burst: ${burst}\n`);
/** The rule made `scope: local`. */
const local = (r: string) => `${r}  scope: local\n`;
const FW = (limit: number, extra = "") => rule(`  algorithm: fixed_window\n  limit: ${limit}\n  window: s\n${extra}`);

function trace(...args: string[]) {
  const parsed = parseGenArgs(args);
  if (parsed === "help" || "error" in parsed) throw new Error(`bad gen args ${args.join(" ")}`);
  return generateTrace(parsed.spec);
}

function replay(before: string, after: string, lines: ReturnType<typeof trace>) {
  const builder = new ReplayBuilder(pairRules(before === "" ? [] : rules(before), after === "" ? [] : rules(after)));
  for (const l of lines) builder.add(l.tMs, l.key, l.cost);
  return builder.finish(10);
}

describe("flips: rule pairs with known answers", () => {
  it.each([
    // 25 at once: burst 20 admits 20, burst 10 admits 10.
    ["a lower burst", TB(20), TB(10), ["--burst", "25@0"], 10, 0],
    ["a higher burst", TB(10), TB(20), ["--burst", "25@0"], 0, 10],
    // 8 at once against 5 per second.
    ["a rule added", "", FW(5), ["--burst", "8@0"], 3, 0],
    ["a rule removed", FW(5), "", ["--burst", "8@0"], 0, 3],
    ["enforce to shadow", FW(5), FW(5, "  mode: shadow\n"), ["--burst", "8@0"], 0, 3],
    // 25 at 0 and 1 at 500 ms: the bucket has refilled 5 tokens; the window (same second) is spent.
    ["another algorithm", TB(20), FW(20), ["--burst", "25@0", "--burst", "1@500ms"], 1, 0],
    ["unchanged", FW(5), FW(5), ["--burst", "8@0"], 0, 0],
    // The trace has no routes: a change of match is listed, not replayed.
    ["a match change only", FW(5), FW(5).replace("api_key", "ip"), ["--burst", "8@0"], 0, 0],
    // Two keys, each 25 at once: every flip counts per key.
    ["two keys", TB(20), TB(15), ["--burst", "25@0", "--keys", "2"], 10, 0],
  ] as const)("%s", (_name, before, after, gen, toDenied, toAllowed) => {
    const r = replay(before, after, trace(...gen));
    const sum = (f: "allowedToDenied" | "deniedToAllowed") => r.lanes.reduce((n, l) => n + l.flips[f], 0);
    expect([sum("allowedToDenied"), sum("deniedToAllowed")]).toEqual([toDenied, toAllowed]);
    expect(totalFlips(r)).toBe(toDenied + toAllowed);
    const histogram = r.lanes.flatMap((l) => [...l.histogram.bins.values()]);
    expect(histogram.reduce((n, b) => n + b.allowedToDenied + b.deniedToAllowed, 0)).toBe(toDenied + toAllowed);
  });

  it("ranks the most affected keys, most first, and bounds the list", () => {
    const lines = [...trace("--burst", "25@0", "--key", "big"), ...trace("--burst", "22@0", "--key", "small")];
    const r = replay(TB(20), TB(10), lines);
    expect(r.topKeys).toEqual([
      { key: "big", allowedToDenied: 10, deniedToAllowed: 0 },
      { key: "small", allowedToDenied: 10, deniedToAllowed: 0 },
    ]);
    const many = replay(TB(20), TB(10), trace("--burst", "21@0", "--keys", "30"));
    expect(many.topKeys).toHaveLength(10);
    expect(many.keys).toBe(30);
  });

  it("only replays rules whose answers can differ", () => {
    const r = replay(
      `${FW(5)}${TB(20).replace("id: r", "id: same")}`,
      `${FW(6)}${TB(20).replace("id: r", "id: same")}`,
      [],
    );
    expect(r.lanes.map((l) => l.pair.id)).toEqual(["r"]);
  });
});

describe("live state on deploy, as the core's carryOver decides", () => {
  const fate = (before: string, after: string) => {
    const [pair] = pairRules(before === "" ? [] : rules(before), after === "" ? [] : rules(after));
    return { change: changeOf(pair!), ...stateFate(pair!) };
  };
  it.each([
    ["lower burst", TB(20), TB(10), "changed", "capped", "a key with 19 left keeps 10; a key at its limit keeps 0"],
    ["higher burst", TB(10), TB(20), "changed", "converted", "a key with 9 left keeps 9; a key at its limit keeps 0"],
    ["same window, lower limit", FW(10), FW(5), "changed", "capped", "a key with 9 left keeps 4"],
    ["another window", FW(10), FW(10).replace("window: s", "window: min"), "changed", "discarded", "starts fresh"],
    ["another algorithm", TB(20), FW(20), "changed", "discarded", "every key starts fresh (20 requests at once)"],
    ["only the mode", FW(5), FW(5, "  mode: shadow\n"), "changed", "kept", "carried over as it is"],
    ["added", "", FW(5), "added", "none", "every key starts fresh"],
    ["removed", FW(5), "", "removed", "dropped", "no longer read"],
    // The Worker finds a global key's state by its object's name (rule id, hash of the identity value) and a local
    // key's in isolate memory: these changes leave the old state unread, whatever carryOver would make of it.
    ["global to local", TB(4), local(TB(4)), "changed", "discarded", "each isolate's memory"],
    ["local to global", local(TB(4)), TB(4), "changed", "discarded", "not moved"],
    ["local, a new burst", local(TB(4)), local(TB(6)), "changed", "discarded", "starts every isolate afresh"],
    [
      "api_key to ip",
      TB(4),
      TB(4).replace("api_key", "ip"),
      "changed",
      "discarded",
      "counted by ip instead of api_key",
    ],
    [
      "ip to user",
      TB(4).replace("api_key", "ip"),
      TB(4).replace("api_key", "user"),
      "changed",
      "discarded",
      "a new key",
    ],
    [
      "a route added",
      TB(4),
      TB(4).replace("identity: api_key", 'route: "GET /x", identity: api_key'),
      "changed",
      "kept",
      "a match change keeps each key's state",
    ],
    // A composite key names other objects than the identity it replaces, and another part list other objects again
    // (src/edge/rule_keys.ts hashes the parts' values): the state a deploy leaves behind is never read. Before, plan
    // said "counted by null instead of ip", and "carried over as it is" for a header part changed to a cookie.
    [
      "identity: ip to key: [ip, header]",
      TB(4).replace("api_key", "ip"),
      TB(4).replace("identity: api_key", "").replace("}\n", "}\n  key: [ip, { header: X-Tenant-Id }]\n"),
      "changed",
      "discarded",
      "counted by key ip, header:x-tenant-id instead of ip",
    ],
    [
      "a key's header part to a cookie",
      TB(4).replace("identity: api_key", "").replace("}\n", "}\n  key: [ip, { header: X-Tenant-Id }]\n"),
      TB(4).replace("identity: api_key", "").replace("}\n", "}\n  key: [ip, { cookie: tenant }]\n"),
      "changed",
      "discarded",
      "counted by key ip, cookie:tenant instead of key ip, header:x-tenant-id",
    ],
    [
      "identity: user to key: [user] (the part's value is the identity's hash, hashed again)",
      TB(4).replace("api_key", "user"),
      TB(4).replace("identity: api_key", "").replace("}\n", "}\n  key: [user]\n"),
      "changed",
      "discarded",
      "a new key",
    ],
    [
      "identity: ip to key: [ip] (the short spelling: the same address, the same object)",
      TB(4).replace("api_key", "ip"),
      TB(4).replace("identity: api_key", "").replace("}\n", "}\n  key: [ip]\n"),
      "changed",
      "kept",
      "carried over as it is",
    ],
  ])("%s", (_name, before, after, change, kind, text) => {
    const f = fate(before, after);
    expect(f.change).toBe(change);
    expect(f.kind).toBe(kind);
    expect(f.text).toContain(text);
  });

  it("says how many requests a key spent to its limit may make just after the deploy", () => {
    expect(fate(TB(4), TB(4).replace("api_key", "ip")).atLimitAdmits).toBe(4);
    expect(fate(TB(4), TB(4).replace("burst: 4", "burst: 4\n  scope: local")).atLimitAdmits).toBe(4);
    expect(fate(TB(4), TB(6)).atLimitAdmits).toBe(0);
    expect(fate(TB(4), FW(5)).atLimitAdmits).toBe(5);
    expect(fate(FW(5), FW(8)).atLimitAdmits).toBe(3);
  });
});

describe("sluice plan", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-plan-"));
  const before = join(dir, "before.yaml");
  const after = join(dir, "after.yaml");
  const traceFile = join(dir, "t.csv");
  writeFileSync(before, `${TB(20)}${FW(5).replace("id: r", "id: gone")}`);
  writeFileSync(after, `${TB(10)}${FW(5).replace("id: r", "id: new")}`);
  writeFileSync(traceFile, "t_ms,key,cost\n".concat("0,a,1\n".repeat(25)));

  it("prints fields, live state and flips; --max-flips fails the run with exit 3", async () => {
    const svg = join(dir, "flips.svg");
    const r = await runCli(["plan", "--from", before, "--to", after, "--trace", traceFile, "--svg", svg]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`sluice plan: ${before} -> ${after}`);
    expect(r.stdout).toContain(
      "r: changed (token_bucket 10/s, burst 10)\n  burst: 20 -> 10\n  live state: carried over, capped",
    );
    expect(r.stdout).toContain("gone: removed");
    expect(r.stdout).toContain("new: added");
    expect(r.stdout).toMatch(/r\s+changed\s+10\s+0\n/);
    expect(r.stdout).toMatch(/gone\s+removed\s+0\s+20\n/);
    expect(r.stdout).toMatch(/new\s+added\s+20\s+0\n/);
    expect(r.stdout).toMatch(/total\s+30\s+20\n/);
    expect(xmlProblems(readFileSync(svg, "utf8"))).toEqual([]);
    const strict = await runCli(["plan", "--from", before, "--to", after, "--trace", traceFile, "--max-flips", "49"]);
    expect(strict.code).toBe(3);
    expect(strict.stderr).toBe("sluice plan: 50 answers flip, more than --max-flips 49\n");
    const loose = await runCli(["plan", "--from", before, "--to", after, "--trace", traceFile, "--max-flips", "50"]);
    expect(loose.code).toBe(0);
  });

  it("reads --from at a git ref: rules committed and unchanged since are unchanged", () => {
    // A scratch repository of its own: the project's rules/ is the user's to edit, and a test must not read it.
    const repo = scratchRules({ "api.yaml": readFileSync("test/fixtures/cli/rules.yaml", "utf8") });
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.com", ...args], { cwd: repo });
    git("init", "--quiet");
    git("add", "rules");
    git("commit", "--quiet", "-m", "rules");
    const r = runCliIn(repo, ["plan", "--from", "HEAD", "--trace", traceFile]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^sluice plan: rules\/ at HEAD -> rules\/\n/);
    expect(r.stdout).toMatch(/0 added, 0 removed, 0 changed, \d+ unchanged/);
    expect(r.stdout).toContain("no rule's answers can differ: 0 flips");
  });

  it.each([
    [[], "--from REF|PATH is required"],
    [["--from", before, "--max-flips", "x"], "--max-flips must be a whole number"],
    [["--from", before, "--trace", traceFile, "--max-flips", "-1"], '--max-flips must be a whole number, got "-1"'],
    [["--from", before, "--trace", traceFile, "--top", "-5"], '--top must be a whole number, got "-5"'],
    [["--from", before, "--svg", "x.svg"], "--svg and --max-flips need --trace"],
  ])("usage error %j exits 2", async (args, message) => {
    const r = await runCli(["plan", ...args]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
  });

  it("a --from path that is not there cannot be read: exit 1, as for any unreadable file", async () => {
    for (const from of ["no-such-ref-or-path", join(dir, "missing.yaml")]) {
      const r = await runCli(["plan", "--from", from, "--to", after]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `--from ${JSON.stringify(from)}: cannot read it: no such file or folder, and not a git ref\n`,
      );
    }
  });

  it("reads a git ref's files only into a fresh temporary folder, also for --to ../rules from a subfolder", () => {
    // A repository of its own, with rules/ beside docs/; the command runs in docs/ with TMPDIR pointing at a
    // folder the test watches: nothing may be left there, and nothing written outside the fresh folder.
    const repo = mkdtempSync(join(tmpdir(), "sluice-plan-repo-"));
    const watched = mkdtempSync(join(tmpdir(), "sluice-plan-tmp-"));
    const git = (...args: string[]) => execFileSync("git", args, { cwd: repo, stdio: "pipe" });
    mkdirSync(join(repo, "rules"));
    mkdirSync(join(repo, "docs"));
    writeFileSync(join(repo, "rules", "api.yaml"), TB(20));
    git("init", "-q");
    git("add", ".");
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "rules");
    writeFileSync(join(repo, "rules", "api.yaml"), TB(10));
    const bin = join(process.cwd(), "bin", "sluice.mjs");
    const r = spawnSync(process.execPath, [bin, "plan", "--from", "HEAD", "--to", "../rules"], {
      cwd: join(repo, "docs"),
      encoding: "utf8",
      env: { ...process.env, TMPDIR: watched },
    });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("sluice plan: ../rules at HEAD -> ../rules");
    expect(r.stdout).toContain("r: changed (token_bucket 10/s, burst 10)\n  burst: 20 -> 10");
    // tsx, which runs the command, keeps its own cache there.
    expect(readdirSync(watched).filter((name) => !name.startsWith("tsx-"))).toEqual([]);
    rmSync(repo, { recursive: true, force: true });
    rmSync(watched, { recursive: true, force: true });
  });

  it("invalid rules and a malformed trace exit 1", async () => {
    const bad = await runCli(["plan", "--from", "test/fixtures/cli/bad.yaml", "--to", after]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("test/fixtures/cli/bad.yaml: tb.burst:");
    writeFileSync(join(dir, "bad.csv"), "0,a\nsoon,a\n");
    const trace = await runCli(["plan", "--from", before, "--to", after, "--trace", join(dir, "bad.csv")]);
    expect(trace.code).toBe(1);
    expect(trace.stderr).toContain('bad.csv:2: t_ms must be an integer number of milliseconds, got "soon"');
  });
});
