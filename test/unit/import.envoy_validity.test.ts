/**
 * `sluice import envoy` refuses a ratelimit service configuration exactly when the envoyproxy/ratelimit service
 * refuses to load it, and reads what it loads as it reads it (gopkg.in/yaml.v2: YAML 1.1). The cases and the
 * service's verdicts are in test/support/ratelimit_cases.ts: the rows marked "(service test)" are the shapes of its
 * test/config/*.yaml that its config_test.go expects to fail, with the message that test pins. CI cannot build the
 * service (Go), so `npm run test:ratelimit-config` (by hand) runs the service's own loader (its src/config at
 * f2fb157, built against small stubs) on every case and on the corpus's service files: 67 of 67 judged alike on
 * 2026-12-07 (23 differ with the import's check turned off). The real behaviour these stand for: a file the service
 * will not load limits nothing, so importing it makes rules of something that never ran; a typo such as
 * `requestsperunit` is caught by the service at start-up, and must not become a silently different rule here.
 */
import { describe, expect, it } from "vitest";
import { EnvoyImportError } from "../../src/migrate/envoy_file.ts";
import { importEnvoy } from "../../src/migrate/envoy_import.ts";
import { parseMapping } from "../../src/migrate/envoy_mapping.ts";
import type { ImportResult } from "../../src/migrate/report.ts";
import { ACCEPTED, one, REFUSED } from "../support/ratelimit_cases.ts";

const SERVICE_REFUSES = /the ratelimit service refuses this configuration/;

function run(yaml: string, map: readonly string[] = []): ImportResult {
  const m = parseMapping(map);
  if (!("mapping" in m)) throw new Error("the default mapping parses");
  return importEnvoy(yaml, "ratelimit.yaml", m.mapping);
}

describe("a configuration the ratelimit service refuses is refused, with its reason", () => {
  it.each(REFUSED)("%s", (_name, yaml, message) => {
    expect(() => run(yaml)).toThrow(EnvoyImportError);
    expect(() => run(yaml)).toThrow(message);
    expect(() => run(yaml)).toThrow(SERVICE_REFUSES);
    expect(() => run(yaml)).toThrow(/^ratelimit\.yaml:\d+: /);
  });
});

describe("a configuration the service loads is imported as it reads it", () => {
  it("reads yes, on and y as true, as yaml.v2 does (YAML 1.1): shadow_mode: yes is a shadow rule", () => {
    for (const word of ["yes", "on", "y", "True"]) {
      const r = run(one(`shadow_mode: ${word}\nrate_limit:\n  unit: second\n  requests_per_unit: 5`));
      expect(r.rules).toHaveLength(1);
      expect(r.rules[0]!.fields).toContainEqual(["mode", "shadow"]);
    }
    const off = run(one("shadow_mode: off\nrate_limit:\n  unit: second\n  requests_per_unit: 5"));
    expect(off.rules[0]!.fields).not.toContainEqual(["mode", "shadow"]);
  });

  it("takes a unit in any case, as the service upper-cases it", () => {
    const r = run(one("rate_limit:\n  unit: Minute\n  requests_per_unit: 5"));
    expect(r.rules[0]!.fields).toContainEqual(["window", "min"]);
  });

  it("a missing count is 0, which denies every request: a deny rule, not refused", () => {
    const r = run(one("rate_limit:\n  unit: second"));
    expect(r.rules.map((x) => x.fields)).toEqual([
      [
        ["deny", true],
        ["status", 429],
      ],
    ]);
    expect(r.report.filter((i) => i.kind === "left out")).toEqual([]);
  });

  it("unlimited without a unit, metadata of any keys, a timestamp-looking value: loaded", () => {
    expect(run(one("rate_limit:\n  unlimited: true")).rules).toEqual([]);
    const meta = run(
      one("metadata:\n  anything: { goes: [1, 2.5] }\nrate_limit:\n  unit: second\n  requests_per_unit: 5"),
    );
    expect(meta.rules).toHaveLength(1);
    // yaml.v2 keeps a plain timestamp as text; the descriptor key is the text.
    expect(() => run("domain: edge\ndescriptors:\n  - key: 2001-12-14\n")).not.toThrow();
  });

  it("share_threshold with a wildcard: one counter for every matching value (a header's: match.header, key global)", () => {
    const r = run(
      "domain: edge\ndescriptors:\n  - key: path\n    value: /files/*\n    share_threshold: true\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
    );
    expect(r.rules).toEqual([]);
    expect(r.report.map((i) => `${i.kind}: ${i.message}`)).toContainEqual(
      expect.stringMatching(
        /^left out: .*wildcard value path=\/files\/\* matches values by a pattern; path is not a request header/,
      ),
    );
    const all = run(
      "domain: edge\ndescriptors:\n  - key: remote_address\n    value: '*'\n    share_threshold: true\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
    );
    expect(all.rules.map((x) => [x.match.header, x.key])).toEqual([
      [["{ name: cf-connecting-ip, present: true }"], "global"],
    ]);
    const header = run(
      "domain: edge\ndescriptors:\n  - key: tier\n    value: gold-*\n    share_threshold: true\n    rate_limit: { unit: second, requests_per_unit: 5 }\n  - key: tier\n    value: free-*\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
      ["tier=header:X-Tier"],
    );
    expect(header.rules.map((x) => [x.match.header, x.key])).toEqual([
      [['{ name: x-tier, prefix: "gold-" }'], "global"],
      [['{ name: x-tier, prefix: "free-" }'], ["{ header: x-tier }"]],
    ]);
  });

  it("a wildcard inside a value is a pattern to the service: left out, not read as a literal value", () => {
    const r = run(
      "domain: edge\ndescriptors:\n  - key: path\n    value: /a*/b\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
    );
    expect(r.rules).toEqual([]);
    expect(r.report.map((i) => i.message)).toContainEqual(expect.stringMatching(/matches values by a pattern/));
  });

  it("quota_mode: reported as what differs, not dropped", () => {
    const r = run(one("quota_mode: true\nrate_limit:\n  unit: second\n  requests_per_unit: 5"));
    expect(r.rules).toHaveLength(1);
    expect(r.report.map((i) => `${i.kind}: ${i.message}`)).toContainEqual(
      expect.stringMatching(/^approximate: .*quota_mode: the service refuses a request only when every quota limit/),
    );
  });
});

/**
 * The local rate limit filter, checked as Envoy checks it (the filter's proto validation and
 * source/extensions/filters/common/local_ratelimit/local_ratelimit_impl.cc, main branch of 2025: the verdicts are
 * read from its code, as Envoy cannot run here) and read as its `requestAllowed` decides.
 */
const FILTER = (lines: string) =>
  `filter_enabled: { default_value: { numerator: 100, denominator: HUNDRED } }\nfilter_enforced: { default_value: { numerator: 100, denominator: HUNDRED } }\n${lines}`;
const WIDE = "stat_prefix: http_local\ntoken_bucket: { max_tokens: 10, tokens_per_fill: 10, fill_interval: 1s }\n";
const PER_ADDRESS =
  "descriptors:\n  - entries: [{ key: remote_address }]\n    token_bucket: { max_tokens: 5, fill_interval: 1s }\n";

describe("a local rate limit filter Envoy refuses is refused, with its reason", () => {
  it.each([
    [
      "no stat_prefix",
      FILTER("token_bucket: { max_tokens: 10, fill_interval: 1s }\n"),
      /stat_prefix: value length must be at least 1/,
    ],
    [
      "a filter-wide fill_interval under 50 ms",
      FILTER("stat_prefix: l\ntoken_bucket: { max_tokens: 10, fill_interval: 0.01s }\n"),
      /local rate limit token bucket fill timer must be >= 50ms/,
    ],
    [
      "a descriptor without fill_interval",
      FILTER(`${WIDE}descriptors:\n  - entries: [{ key: remote_address }]\n    token_bucket: { max_tokens: 5 }\n`),
      /descriptor token bucket fill timer must be >= 50ms/,
    ],
    [
      "two descriptors with the same entries",
      FILTER(
        `${WIDE}${PER_ADDRESS}  - entries: [{ key: remote_address }]\n    token_bucket: { max_tokens: 9, fill_interval: 2s }\n`,
      ),
      /duplicate descriptor in the local rate descriptor: remote_address=/,
    ],
    [
      "a status name Envoy has not",
      FILTER(`${WIDE}status: { code: TooMany }\n`),
      /status: code must be one of Envoy's status names/,
    ],
    ["status Empty (0)", FILTER(`${WIDE}status: { code: 0 }\n`), /status: code must be one of/],
  ])("%s", (_name, yaml, message) => {
    expect(() => run(yaml)).toThrow(EnvoyImportError);
    expect(() => run(yaml)).toThrow(message);
    expect(() => run(yaml)).toThrow(/Envoy refuses this configuration/);
  });
});

describe("a local rate limit filter is read as Envoy's requestAllowed decides", () => {
  const items = (r: ImportResult) => r.report.map((i) => `${i.kind}: ${i.message}`);

  it("the filter-wide bucket counts every request unless always_consume_default_token_bucket is false", () => {
    const always = run(FILTER(`${WIDE}${PER_ADDRESS}`));
    expect(always.rules.map((r) => r.key ?? r.match.identity)).toEqual(["global", "ip"]);
    expect(items(always).some((i) => i.includes("only requests no descriptor matched"))).toBe(false);
    const onlyUnmatched = run(FILTER(`${WIDE}always_consume_default_token_bucket: false\n${PER_ADDRESS}`));
    expect(items(onlyUnmatched)).toContainEqual(expect.stringMatching(/only requests no descriptor matched/));
  });

  it("no filter-wide bucket when its fill_interval is 0 or not set: only the descriptors' rules", () => {
    for (const bucket of ["{ max_tokens: 10, fill_interval: 0s }", "{ max_tokens: 10 }"]) {
      const r = run(FILTER(`stat_prefix: l\ntoken_bucket: ${bucket}\n${PER_ADDRESS}`));
      expect(r.rules.map((x) => x.match.identity ?? x.key)).toEqual(["ip"]);
    }
  });

  it("a value-less entry is one bucket per value, at most max_dynamic_descriptors of them", () => {
    const r = run(FILTER(`${WIDE}max_dynamic_descriptors: 500\n${PER_ADDRESS}`));
    expect(items(r)).toContainEqual(
      expect.stringMatching(/Envoy keeps at most 500 of them \(max_dynamic_descriptors\)/),
    );
  });

  it("Envoy keeps what earlier buckets took from a refused request: reported where several apply", () => {
    expect(items(run(FILTER(`${WIDE}${PER_ADDRESS}`)))).toContainEqual(
      expect.stringMatching(/keeps what it took when a later bucket refuses/),
    );
    expect(items(run(FILTER(WIDE))).some((i) => i.includes("keeps what it took"))).toBe(false);
  });

  it("a status below 400 is answered 429, as Envoy's toErrorCode does; { seconds, nanos } durations read", () => {
    const r = run(
      FILTER(
        `stat_prefix: l\nstatus: { code: OK }\ntoken_bucket: { max_tokens: 10, fill_interval: { seconds: 0, nanos: 250000000 } }\n`,
      ),
    );
    expect(r.rules[0]!.fields).toContainEqual(["status", 429]);
    expect(r.rules[0]!.fields).toContainEqual(["rate", "1/250ms"]);
    expect(items(r)).toContainEqual(expect.stringMatching(/below 400, which Envoy answers with 429/));
  });
});

describe("YAML as yaml.v2 reads it (scripts/yaml-v2-check.ts checks these against the real yaml.v2)", () => {
  it("a number or boolean in a text field is its own text; a whole number above 2^63-1 is refused", () => {
    const r = run(
      "domain: 5\ndescriptors:\n  - key: remote_address\n    value: 0x1F\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
    );
    expect(r.rules.map((x) => x.match.header)).toEqual([['{ name: cf-connecting-ip, equals: "0x1F" }']]);
    expect(() => run("domain: edge\ndescriptors:\n  - key: 12345678901234567890\n")).toThrow(
      /is a number above 2\^63-1/,
    );
    expect(() => run("domain: edge\ndescriptors:\n  - key: remote_address\n    value: 1e3\n")).toThrow(
      /1e3 is a float/,
    );
  });
});

describe("a configuration the ratelimit service loads is not refused", () => {
  it.each(ACCEPTED)("%s", (_name, yaml) => {
    expect(() => run(yaml)).not.toThrow();
  });
});

/**
 * The service looks a descriptor's entry up as `key_value` first (then a wildcard), and as `key` alone only when
 * neither is there (config_impl.go `GetLimit`). Run on the real loader (`/tmp/probe --lookup svc.yaml edge tier=free
 * tier=pro`, scripts/ratelimit-config/main.go): tier=free gets only `edge.tier_free` (10/s), tier=pro `edge.tier`
 * (5/s). So the valueless chain's rule must leave tier=free's requests alone.
 */
describe("a key's value of its own comes before the key alone", () => {
  const service =
    "domain: edge\ndescriptors:\n  - key: tier\n    value: free\n    rate_limit: { unit: second, requests_per_unit: 10 }\n  - key: tier\n    rate_limit: { unit: second, requests_per_unit: 5 }\n";
  const withMap = (...specs: string[]) => {
    const m = parseMapping(specs);
    if (!("mapping" in m)) throw new Error("mapping");
    return importEnvoy(service, "ratelimit.yaml", m.mapping);
  };

  it("a sibling value that means a route: the valueless rule excepts that route", () => {
    const r = withMap("tier=header:x-tier", "tier:free=route:GET /v1/free");
    const valueless = r.rules.find((x) => x.id === "edge-tier")!;
    expect([valueless.match.except].flat()).toEqual(["GET /v1/free"]);
  });

  it("a sibling value that means a plan: reported, since a rule cannot except a plan", () => {
    const r = withMap("tier=header:x-tier", "tier:free=plan:free");
    expect(r.report.map((i) => `${i.kind}: ${i.message}`)).toContainEqual(
      "approximate: tier: a request with tier=free goes to that descriptor of its own (the service looks up a key's value before the key alone), never to this one; Sluice's rule counts it too",
    );
  });
});
