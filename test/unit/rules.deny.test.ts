/**
 * Deny rules (`deny: true`, src/rules/deny.ts): read strictly, with messages that say where and why; replayed by
 * `sluice simulate` (verdict `forbidden`, nothing charged) and reported by `sluice plan` (added, changed, removed,
 * and the requests whose answer flips). The Workers runtime side: test/integration/deny.test.ts.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { formatRequestLine, type RequestLine, requestTraceHeader } from "../../src/replay/request_trace.ts";
import { loadRules } from "../../src/rules/load.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { runCli } from "../support/io.ts";

const LIMIT = `
- id: per-ip
  match: { route: "* /v1/**", identity: ip }
  algorithm: fixed_window
  limit: 2
  window: min
`;

describe("a deny rule, read", () => {
  it("with its defaults: enforce, status 403, no description, no identity", () => {
    const { rules, denies, errors, warnings } = parseRules(
      `${LIMIT}- id: blocked\n  deny: true\n  match: { address: [198.51.100.9, "2001:db8::/32"] }\n`,
      "r.yaml",
    );
    expect(errors).toEqual([]);
    expect(warnings).toEqual([]);
    expect(rules.map((r) => r.id)).toEqual(["per-ip"]);
    expect(denies).toHaveLength(1);
    expect(denies[0]).toMatchObject({ id: "blocked", file: "r.yaml", mode: "enforce", status: 403, description: "" });
    expect(denies[0]!.match.identity).toBeNull();
    expect(denies[0]!.match.addresses?.map((a) => a.source)).toEqual(["198.51.100.9", "2001:db8::/32"]);
  });

  it.each<[string, string, string[]]>([
    [
      "deny not true",
      "deny: yes\n  match: { address: 198.51.100.9 }",
      ['x.deny: must be true (a rule that limits leaves deny out), got "yes"'],
    ],
    [
      "an algorithm and its parameters",
      "deny: true\n  algorithm: gcra\n  burst: 5\n  match: { address: 198.51.100.9 }",
      [
        "x.algorithm: a deny rule refuses every request it matches and counts nothing, so it takes no algorithm",
        "x.burst: a deny rule refuses every request it matches and counts nothing, so it takes no burst",
      ],
    ],
    [
      "a field of a limit rule",
      "deny: true\n  on_error: closed\n  match: { address: 198.51.100.9 }",
      ["x.on_error: a deny rule refuses every request it matches and counts nothing, so it takes no on_error"],
    ],
    [
      "a misspelt field",
      "deny: true\n  statuss: 429\n  match: { address: 198.51.100.9 }",
      ['x.statuss: unknown key; did you mean "status"?'],
    ],
    [
      "a bad status",
      "deny: true\n  status: 200\n  match: { address: 198.51.100.9 }",
      ["x.status: must be an HTTP status from 400 to 599, got 200"],
    ],
    ["no match", "deny: true", ["x.match: required, e.g. { address: [203.0.113.7] }"]],
  ])("refused with its reason: %s", (_name, body, want) => {
    const { denies, errors } = parseRules(`- id: x\n  ${body}\n`, "r.yaml");
    expect(denies).toEqual([]);
    expect(errors.map((e) => e.replace(/^r\.yaml(:\d+:\d+)?: /, ""))).toEqual(want);
  });

  it("refuses an identity or a key, saying it names whom to refuse instead", () => {
    const a = parseRules("- id: x\n  deny: true\n  match: { identity: ip }\n", "r.yaml");
    expect(a.errors).toEqual([
      "r.yaml:3:22: x.match.identity: a deny rule refuses whoever its match names and counts no one, so it takes no " +
        "identity; name whom to refuse with match.address, match.header, match.plan or match.route",
    ]);
    const b = parseRules("- id: x\n  deny: true\n  key: global\n  match: { plan: free }\n", "r.yaml");
    expect(b.errors.join("\n")).toMatch(/x\.key: a deny rule refuses every request it matches and counts nothing/);
  });

  it("a misspelt deny is named on a limit rule", () => {
    const { errors } = parseRules("- id: x\n  deni: true\n  match: { address: 198.51.100.9 }\n", "r.yaml");
    expect(errors).toContain('r.yaml: x.deni: unknown key; did you mean "deny"?');
  });

  it("warns when its match names nothing: it refuses every request", () => {
    const { denies, warnings } = parseRules("- id: all\n  deny: true\n  match: {}\n", "r.yaml");
    expect(denies).toHaveLength(1);
    expect(warnings).toEqual([
      "r.yaml: all.match: warning: names no plan, route, header, cookie, query, cf value or address: it refuses every request",
    ]);
  });

  it("shares the ids of limit rules: unique in a file and across files", () => {
    const one = parseRules(`${LIMIT}- id: per-ip\n  deny: true\n  match: { plan: free }\n`, "r.yaml");
    expect(one.errors.join("\n")).toMatch(/per-ip \(rules\[1\]\)\.id: duplicate id/);
    const dir = mkdtempSync(join(tmpdir(), "sluice-deny-"));
    writeFileSync(join(dir, "a.yaml"), LIMIT);
    writeFileSync(join(dir, "b.yaml"), "- id: per-ip\n  deny: true\n  match: { plan: free }\n");
    const loaded = loadRules([dir]);
    expect(loaded.errors).toEqual([
      `${join(dir, "b.yaml")}: per-ip.id: duplicate id (first defined in ${join(dir, "a.yaml")})`,
    ]);
    expect(loaded.denies).toEqual([]);
  });
});

const line = (tMs: number, path: string, address: string): RequestLine => ({
  tMs,
  method: "GET",
  path,
  address,
  key: null,
  user: null,
  cost: null,
  answered: null,
});

function files(rules: string, lines: readonly RequestLine[]) {
  const dir = mkdtempSync(join(tmpdir(), "sluice-deny-"));
  writeFileSync(join(dir, "rules.yaml"), rules);
  writeFileSync(join(dir, "trace.csv"), requestTraceHeader() + lines.map(formatRequestLine).join(""));
  return { rules: join(dir, "rules.yaml"), trace: join(dir, "trace.csv"), dir };
}

const DENY = "- id: blocked\n  deny: true\n  status: 429\n  match: { address: 198.51.100.9 }\n";

describe("sluice simulate replays deny rules as the gateway", () => {
  it("a refused line is forbidden with the rule's id and status, and charges no rule", async () => {
    const trace = [line(0, "/v1/a", "198.51.100.9"), line(1, "/v1/a", "198.51.100.9"), line(2, "/v1/a", "192.0.2.1")];
    const f = files(`${LIMIT}${DENY}`, [...trace, line(3, "/v1/a", "192.0.2.1"), line(4, "/v1/a", "192.0.2.1")]);
    const res = await runCli(["simulate", "--rules", f.rules, "--trace", f.trace]);
    expect(res.stderr).toBe("");
    const out = res.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { verdict: string; status: number; rule?: string; rules: unknown[] });
    expect(out.map((o) => [o.verdict, o.status, o.rule ?? null, o.rules.length])).toEqual([
      ["forbidden", 429, "blocked", 0],
      ["forbidden", 429, "blocked", 0],
      ["allowed", 200, null, 1],
      ["allowed", 200, null, 1],
      ["denied", 429, null, 1],
    ]);
    // --rule names a deny rule as it names any other.
    const one = await runCli(["simulate", "--rules", f.rules, "--rule", "blocked", "--trace", f.trace]);
    expect(
      one.stdout
        .trim()
        .split("\n")
        .map((l) => (JSON.parse(l) as { verdict: string }).verdict),
    ).toEqual(["forbidden", "forbidden", "allowed", "allowed", "allowed"]);
  });
});

describe("a deny rule's header in a request trace (version 2)", () => {
  it("simulate reads the column only a deny rule names, and says when a trace lacks it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-deny-"));
    writeFileSync(
      join(dir, "rules.yaml"),
      `${LIMIT}- id: bots\n  deny: true\n  match: { header: { name: X-Bot, present: true } }\n`,
    );
    writeFileSync(
      join(dir, "trace.csv"),
      "# sluice request trace v2\nt_ms,method,path,address,key,user,cost,host,asn,country,colo,ja4,header:x-bot\n" +
        "0,GET,/v1/a,192.0.2.1,,,,,,,,,yes\n1,GET,/v1/a,192.0.2.1,,,,,,,,,\n",
    );
    const res = await runCli(["simulate", "--rules", join(dir, "rules.yaml"), "--trace", join(dir, "trace.csv")]);
    expect(res.stderr).toBe("");
    expect(
      res.stdout
        .trim()
        .split("\n")
        .map((l) => (JSON.parse(l) as { verdict: string }).verdict),
    ).toEqual(["forbidden", "allowed"]);
    // A trace without the column: said once, as for any column the rules read.
    writeFileSync(
      join(dir, "bare.csv"),
      "# sluice request trace v2\nt_ms,method,path,address,key,user,cost,host,asn,country,colo,ja4\n0,GET,/v1/a,192.0.2.1,,,,,,,,\n",
    );
    const bare = await runCli(["simulate", "--rules", join(dir, "rules.yaml"), "--trace", join(dir, "bare.csv")]);
    expect(bare.stderr).toContain("warning: the trace has no header:x-bot column");
  });
});

describe("sluice plan reports deny rules", () => {
  it("added, and the requests whose answer flips", async () => {
    const trace = [0, 1, 2].map((t) => line(t, "/v2/a", "198.51.100.9"));
    const before = files(LIMIT, trace);
    const after = files(`${LIMIT}${DENY}`, trace);
    const res = await runCli(["plan", "--from", before.rules, "--to", after.rules, "--trace", after.trace]);
    expect(res.stderr).toBe("");
    expect(res.stdout).toContain("blocked: added (deny rule, status 429: match.address 198.51.100.9)");
    expect(res.stdout).toContain("deny rules: 1 added, 0 removed, 0 changed, 0 unchanged");
    expect(res.stdout).toMatch(/\nblocked +deny +3 +0\nrequests +3 +0\n/);
  });

  it("changed and removed", async () => {
    const before = files(`${LIMIT}${DENY}- id: old\n  deny: true\n  match: { plan: legacy }\n`, []);
    const after = files(`${LIMIT}${DENY.replace("status: 429", "status: 403")}`, []);
    const res = await runCli(["plan", "--from", before.rules, "--to", after.rules]);
    expect(res.stdout).toContain(
      "blocked: changed (deny rule, status 403: match.address 198.51.100.9; was deny rule, status 429: match.address 198.51.100.9)",
    );
    expect(res.stdout).toContain("old: removed (deny rule, status 403: match.plan legacy)");
    expect(res.stdout).toContain("deny rules: 0 added, 1 removed, 1 changed, 0 unchanged");
  });
});

describe("any value in any field of a deny rule", () => {
  // JSON is YAML: random rule objects of deny's keys, a limit rule's and strangers, with values of every shape.
  const value = fc.oneof(
    fc.constantFrom(true, false, null, 0, 403, 429, 200, -1, 1.5, "", "shadow", "enforce", "198.51.100.9", "x"),
    fc.string({ maxLength: 8 }),
    fc.array(fc.constantFrom("198.51.100.0/24", "nope", 7), { maxLength: 3 }),
    fc.dictionary(
      fc.constantFrom("address", "route", "plan", "identity", "header", "bogus"),
      fc.constantFrom("198.51.100.9", "GET /x", "free", "ip", 3),
    ),
  );
  const keys = fc.constantFrom(
    "id",
    "deny",
    "match",
    "mode",
    "status",
    "description",
    "algorithm",
    "burst",
    "key",
    "cost",
    "statuss",
  );
  it("is read or refused with messages, never thrown", () => {
    const seen = { read: 0, refused: 0 };
    fc.assert(
      fc.property(fc.dictionary(keys, value), (fields) => {
        const rule = { id: "d", deny: true, match: { address: "198.51.100.9" }, ...fields };
        const { rules, denies, errors } = parseRules(JSON.stringify([rule]), "r.yaml");
        expect(rules).toEqual([]);
        if (errors.length === 0) {
          expect(denies).toHaveLength(1);
          seen.read++;
        } else {
          seen.refused++;
          expect(denies).toEqual([]);
          for (const e of errors) expect(e).toMatch(/^r\.yaml(:\d+:\d+)?: /);
        }
      }),
      { seed: 36, numRuns: 400 },
    );
    // Both outcomes came up: the property looked at valid rules too.
    expect(seen.read).toBeGreaterThan(0);
    expect(seen.refused).toBeGreaterThan(0);
  });
});
