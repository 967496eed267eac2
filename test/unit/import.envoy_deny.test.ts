/**
 * `requests_per_unit: 0` (the envoyproxy/ratelimit service refuses every request that sends the descriptor: its
 * README's "Black list IP", Example 3) imported as a deny rule (src/migrate/envoy_service.ts `denyDraft`), with the
 * status Envoy answers (429), and replayed: the listed address refused, every other client limited as before.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { importEnvoy } from "../../src/migrate/envoy_import.ts";
import { parseMapping } from "../../src/migrate/envoy_mapping.ts";
import { type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { formatRequestLine, type RequestLine, requestTraceHeader } from "../../src/replay/request_trace.ts";
import { parseRules } from "../../src/rules/yaml.ts";
import { runCli } from "../support/io.ts";

/** The service's README, Example 3, as written there. */
const EXAMPLE_3 = `domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`;

function imported(service: string, maps: readonly string[] = []): ImportResult {
  const m = parseMapping(maps);
  if ("error" in m) throw new Error(m.error);
  const result = importEnvoy(service, "ratelimit.yaml", m.mapping);
  expect(parseRules(rulesYaml(result, "test"), "imported.yaml").errors).toEqual([]);
  return result;
}

describe("requests_per_unit 0 is a deny rule", () => {
  it("the README's blocklist: the address refused with 429, the key's rule leaves it out, nothing left out", () => {
    const r = imported(EXAMPLE_3);
    expect(r.rules.map((x) => [x.id, x.match, x.fields])).toEqual([
      [
        "edge_proxy_per_ip-remote_address",
        { except_address: ["50.0.0.5"], identity: "ip" },
        [
          ["algorithm", "fixed_window"],
          ["limit", 10],
          ["window", "s"],
        ],
      ],
      [
        "edge_proxy_per_ip-50.0.0.5",
        { address: ["50.0.0.5"] },
        [
          ["deny", true],
          ["status", 429],
        ],
      ],
    ]);
    expect(r.report.filter((i) => i.kind !== "note")).toEqual([]);
  });

  it("on a key alone: every request that sends it, so the key's header must be there (a present test)", () => {
    const r = imported(
      "domain: d\ndescriptors:\n  - key: tenant\n    shadow_mode: true\n    rate_limit: { unit: minute, requests_per_unit: 0 }\n",
      ["tenant=header:X-Tenant"],
    );
    expect(r.rules.map((x) => [x.match, x.key, x.fields])).toEqual([
      [
        { header: ["{ name: x-tenant, present: true }"] },
        undefined,
        [
          ["deny", true],
          ["status", 429],
          ["mode", "shadow"],
        ],
      ],
    ]);
  });

  it("for callers a match cannot name (a user): left out, saying why", () => {
    const r = imported(
      "domain: d\ndescriptors:\n  - key: who\n    rate_limit: { unit: minute, requests_per_unit: 0 }\n",
      ["who=user"],
    );
    expect(r.rules).toEqual([]);
    expect(r.report.filter((i) => i.kind === "left out").map((i) => i.message)).toEqual([
      "who: requests_per_unit 0 refuses every request that sends it, and only callers with user send it; a deny rule names whom it refuses by its match, which cannot test for user",
    ]);
  });
});

describe("unlimited for one address, beside the address alone", () => {
  it("the address's rule leaves it out exactly (match.except_address): a note, nothing approximate", () => {
    const r = imported(
      EXAMPLE_3.replace("requests_per_unit: 0", "unlimited: true").replace(
        "      unit: second\n      unlimited",
        "      unlimited",
      ),
    );
    expect(r.rules.map((x) => x.match)).toEqual([{ except_address: ["50.0.0.5"], identity: "ip" }]);
    expect(r.report.filter((i) => i.kind !== "note")).toEqual([]);
  });
});

describe("the imported blocklist, replayed", () => {
  it("refuses the listed address with 429 and limits every other client to 10 a second", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-envoy-deny-"));
    writeFileSync(join(dir, "ratelimit.yaml"), EXAMPLE_3);
    const out = await runCli(["import", "envoy", join(dir, "ratelimit.yaml"), "--out", join(dir, "rules.yaml")]);
    expect(out.code).toBe(0);
    const line = (tMs: number, address: string): RequestLine => ({
      tMs,
      method: "GET",
      path: "/",
      address,
      key: null,
      user: null,
      cost: null,
      answered: null,
    });
    const lines = [line(0, "50.0.0.5"), ...Array.from({ length: 11 }, (_, i) => line(i, "192.0.2.7"))];
    writeFileSync(join(dir, "trace.csv"), requestTraceHeader() + lines.map(formatRequestLine).join(""));
    const sim = await runCli(["simulate", "--rules", join(dir, "rules.yaml"), "--trace", join(dir, "trace.csv")]);
    expect(sim.stderr).toBe("");
    const verdicts = sim.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { verdict: string; status: number });
    expect(verdicts.map((v) => `${v.verdict} ${v.status}`)).toEqual([
      "forbidden 429",
      ...Array(10).fill("allowed 200"),
      "denied 429",
    ]);
  });
});
