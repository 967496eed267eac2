/**
 * Rule validation: one fixture per kind of error, each with its exact messages (a file with several errors reports
 * all of them), the example rules, and the exactness bounds at their edges.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { capacityOf } from "../../src/algorithms/index.ts";
import { loadRules } from "../../src/rules/load.ts";
import type { ResolvedRule } from "../../src/rules/types.ts";
import { parseRules } from "../../src/rules/yaml.ts";

const DIR = "test/fixtures/rules";
/** A copy of the shipped rules/shiplane.yaml: the tests never read rules/, which is the user's to edit. */
const SHIPPED = "test/fixtures/shipped/shiplane.yaml";

const FIXTURES: { fixture: string; valid: number; errors: string[] }[] = [
  {
    fixture: "bad-duration.yaml",
    valid: 0,
    errors: [
      `${DIR}/bad-duration.yaml: a.window: must be a duration like 250ms, 3s, 10min, h or d (an optional positive integer and a unit: ms, s, min, h, d), got 60 (for a number of seconds, use window_s)`,
      `${DIR}/bad-duration.yaml: b.window: must be a duration like 250ms, 3s, 10min, h or d (an optional positive integer and a unit: ms, s, min, h, d), got "1 min"`,
      `${DIR}/bad-duration.yaml: c.window: the count in a duration must be a positive integer without leading zeros, got "0s"`,
      `${DIR}/bad-duration.yaml: d.window: "20000000d" is too long (max 2^40 ms, about 34 years)`,
      `${DIR}/bad-duration.yaml: e.window: must be a duration like 250ms, 3s, 10min, h or d (an optional positive integer and a unit: ms, s, min, h, d), got "week"`,
    ],
  },
  {
    fixture: "bad-enum.yaml",
    valid: 0,
    errors: [
      `${DIR}/bad-enum.yaml: free-global.algorithm: must be one of token_bucket, gcra, leaky_bucket, leaky_queue, fixed_window, sliding_log, sliding_counter, concurrency, got "token-bucket"; did you mean "token_bucket"?`,
      `${DIR}/bad-enum.yaml:2:34: free-global.match.identity: must be one of api_key, ip, user, got "apikey"; did you mean "api_key"?`,
      `${DIR}/bad-enum.yaml: free-global.mode: must be one of enforce, shadow, got "dry_run"`,
      `${DIR}/bad-enum.yaml: free-global.scope: must be one of global, local, got "regional"`,
      `${DIR}/bad-enum.yaml: free-global.on_error: must be one of open, closed, got "fail"`,
      `${DIR}/bad-enum.yaml: free-global.status: must be an HTTP status from 400 to 599, got 200`,
      `${DIR}/bad-enum.yaml:11:18: growth.match.plan: must be a plan name or a non-empty list of plan names, got an empty list`,
      `${DIR}/bad-enum.yaml: growth.status: must be an HTTP status from 400 to 599, got "429"`,
    ],
  },
  {
    fixture: "bad-id.yaml",
    valid: 0,
    errors: [
      `${DIR}/bad-id.yaml:1:7: rules[0].id: must be a non-empty string of letters, digits, _, . and -, got "free global"`,
      `${DIR}/bad-id.yaml:6:7: rules[1].id: must be a non-empty string of letters, digits, _, . and -, got 42`,
    ],
  },
  {
    fixture: "bad-rate.yaml",
    valid: 0,
    errors: [
      `${DIR}/bad-rate.yaml: a.rate: must be a rate "<amount>/<duration>" such as 10/s, 100/min or 7/3s, got 10 (for a count per second, use rate_per_s)`,
      `${DIR}/bad-rate.yaml: b.rate: bad period in rate "10/sec": must be a duration like 250ms, 3s, 10min, h or d (an optional positive integer and a unit: ms, s, min, h, d), got "sec"`,
      `${DIR}/bad-rate.yaml: c.rate: the amount of a rate must be a positive integer without leading zeros, got "0/s"`,
      `${DIR}/bad-rate.yaml: d.rate: must be a rate "<amount>/<duration>" such as 10/s, 100/min or 7/3s, got "ten per second"`,
    ],
  },
  {
    fixture: "bad-route.yaml",
    valid: 0,
    errors: [
      `${DIR}/bad-route.yaml:2:19: a.match.route: must be "METHOD /path", e.g. "POST /v1/labels:batch", got "/v1/login"`,
      `${DIR}/bad-route.yaml:7:19: b.match.route: the path must start with /, got "POST v1/login"`,
      `${DIR}/bad-route.yaml:12:19: c.match.route: ** may only be the last segment, got "POST /v1/**/labels"`,
      `${DIR}/bad-route.yaml:17:19: d.match.route: * must be a whole segment, or ** begin or end the last one ("label*" mixes it with other characters), got "POST /v1/label*"`,
      `${DIR}/bad-route.yaml: d.cost_by_route["P0ST /v1/labels"]: the method must be letters (GET, POST, ...) or * for any, got "P0ST /v1/labels"`,
      `${DIR}/bad-route.yaml: d.cost_by_route["GET /v1//x"]: the path has an empty segment (//), got "GET /v1//x"`,
    ],
  },
  {
    fixture: "buckets.yaml",
    valid: 1,
    errors: [
      `${DIR}/buckets.yaml: not-a-divisor.buckets: the window (60000 ms) must be a whole multiple of buckets, got 7; try 6 or 8 (or a window in ms divisible by 7)`,
      `${DIR}/buckets.yaml: zero.buckets: must be a positive integer, got 0`,
      `${DIR}/buckets.yaml: not-an-integer.buckets: must be a positive integer, got "4"`,
      `${DIR}/buckets.yaml: too-many.buckets: must be at most 10000 (the state keeps buckets + 1 counts per key), got 86400`,
      `${DIR}/buckets.yaml: monthly.window: month is only for fixed_window; sliding_counter needs a fixed length such as 30d`,
      `${DIR}/buckets.yaml: on-a-log.buckets: not a parameter of sliding_log (sliding_log takes limit, and window_s or window)`,
      `${DIR}/buckets.yaml: odd-ms.buckets: the window (7 ms) must be a whole multiple of buckets, got 2; try 1 (or a window in ms divisible by 2)`,
    ],
  },
  {
    fixture: "burst-zero.yaml",
    valid: 2,
    errors: [
      `${DIR}/burst-zero.yaml: bucket-zero.burst: must be a positive integer, got 0 (burst 0, NGINX's default, is only for leaky_queue)`,
      `${DIR}/burst-zero.yaml: gcra-zero.burst: must be a positive integer, got 0 (burst 0, NGINX's default, is only for leaky_queue)`,
      `${DIR}/burst-zero.yaml: meter-zero.burst: must be a positive integer, got 0 (burst 0, NGINX's default, is only for leaky_queue)`,
      `${DIR}/burst-zero.yaml: queue-delay.delay: must be at most burst (0), got 1`,
      `${DIR}/burst-zero.yaml: queue-negative.burst: must be an integer >= 0, got -1`,
    ],
  },
  {
    fixture: "cost-exceeds-capacity.yaml",
    valid: 0,
    errors: [
      `${DIR}/cost-exceeds-capacity.yaml: labels-bulk.cost: cost 21 is more than the rule's capacity 20 (burst); such a request could never be admitted`,
      `${DIR}/cost-exceeds-capacity.yaml: labels-bulk.cost_by_route["POST /v1/labels:batch"]: cost 25 is more than the rule's capacity 20 (burst); such a request could never be admitted`,
      `${DIR}/cost-exceeds-capacity.yaml: queue.cost: cost 22 is more than the rule's capacity 21 (burst + 1); such a request could never be admitted`,
      `${DIR}/cost-exceeds-capacity.yaml: login-per-ip.cost_by_route["POST /v1/login"]: cost 6 is more than the rule's capacity 5 (limit); such a request could never be admitted`,
    ],
  },
  {
    fixture: "dup-dir",
    valid: 2,
    errors: [`${DIR}/dup-dir/b.yml: free-global.id: duplicate id (first defined in ${DIR}/dup-dir/a.yaml)`],
  },
  {
    fixture: "duplicate-id.yaml",
    valid: 0,
    // Each rule that has the id is reported, by its place: one name would not say which is which.
    errors: [
      `${DIR}/duplicate-id.yaml:1:7: free-global (rules[0]).id: duplicate id: rules[1] (line 6) has it too; ids are unique`,
      `${DIR}/duplicate-id.yaml:6:7: free-global (rules[1]).id: duplicate id: rules[0] (line 1) has it too; ids are unique`,
    ],
  },
  {
    fixture: "duplicate-key.yaml",
    valid: 0,
    errors: [`${DIR}/duplicate-key.yaml:6:3: Map keys must be unique`],
  },
  {
    fixture: "empty.yaml",
    valid: 0,
    errors: [`${DIR}/empty.yaml: the file is empty; expected a list of rules`],
  },
  {
    fixture: "exactness.yaml",
    valid: 0,
    errors: [
      `${DIR}/exactness.yaml: huge-burst.burst: burst × rate period is too large for exact arithmetic (max 2^50); use a shorter period or a smaller burst (20000000 × 86400000 ms)`,
      `${DIR}/exactness.yaml: huge-queue.burst: (burst + 1) × rate period is too large for exact arithmetic (max 2^50); use a shorter period or a smaller burst (312750000 × 3600000 ms)`,
      `${DIR}/exactness.yaml: huge-window.limit: limit × window is too large for exact arithmetic (max 2^50); use a shorter window or a smaller limit (20000000 × 86400000 ms)`,
      `${DIR}/exactness.yaml: long-period.rate: bad period in rate "1/20000d": "20000d" is too long (max 2^40 ms, about 34 years)`,
      `${DIR}/exactness.yaml: long-window.window_s: is too long (max 2^40 ms, about 34 years), got 1100000000`,
      `${DIR}/exactness.yaml: huge-int.limit: must be at most 2^50, got 99999999999999999999`,
    ],
  },
  {
    fixture: "foreign-param.yaml",
    valid: 0,
    errors: [
      `${DIR}/foreign-param.yaml: free-global.limit: not a parameter of token_bucket (token_bucket takes rate_per_s or rate, and burst)`,
      `${DIR}/foreign-param.yaml: login-per-ip.burst: not a parameter of sliding_log (sliding_log takes limit, and window_s or window)`,
      `${DIR}/foreign-param.yaml: login-per-ip.count_denied: not a parameter of sliding_log (sliding_log takes limit, and window_s or window)`,
      `${DIR}/foreign-param.yaml: queue.nodelay: not a parameter of gcra (gcra takes rate_per_s or rate, and burst)`,
    ],
  },
  {
    fixture: "lease.yaml",
    valid: 0,
    errors: [
      `${DIR}/lease.yaml: not-a-mapping.lease: must be a mapping such as { ttl: 1s, units: 100, above: 200/s }, got "yes"`,
      `${DIR}/lease.yaml: unknown-key.lease.unit: unknown key; did you mean "units"?`,
      `${DIR}/lease.yaml: sliding.lease: sliding_log takes no lease (a unit charged early would leave the sliding window before its request does); leases are for token_bucket, gcra, leaky_bucket and fixed_window`,
      `${DIR}/lease.yaml: queue.lease: leaky_queue takes no lease (each request's place in the queue is decided when it arrives); leases are for token_bucket, gcra, leaky_bucket and fixed_window`,
      `${DIR}/lease.yaml: local.lease: a lease is a slice of a global key's budget; a scope: local rule is already decided in the isolate`,
      `${DIR}/lease.yaml: bad-values.lease.ttl: must be a duration like 250ms, 3s, 10min, h or d (an optional positive integer and a unit: ms, s, min, h, d), got "1 min"`,
      `${DIR}/lease.yaml: bad-values.lease.units: must be at most a quarter of the rule's capacity 100 (25): one isolate would hold most of the key's budget while the others refuse, got 101`,
      `${DIR}/lease.yaml: bad-values.lease.above: must be a rate "<amount>/<duration>" such as 200/s, got 10`,
      `${DIR}/lease.yaml: too-long.lease.ttl: must be at most 10s (the bound for rate rules loosens by rate × ttl), got "11s"`,
      `${DIR}/lease.yaml: too-long.lease.units: must be a positive integer, got 0`,
      `${DIR}/lease.yaml: too-long.lease.above: the amount of a rate must be a positive integer without leading zeros, got "0/s"`,
      `${DIR}/lease.yaml: longer-than-window.lease.ttl: must be at most the rule's window (1000 ms): a lease is cut at its window's end, so a longer ttl cannot work, got "2s"`,
      `${DIR}/lease.yaml: near-capacity.lease.units: must be at most a quarter of the rule's capacity 100 (25): one isolate would hold most of the key's budget while the others refuse, got 26`,
    ],
  },
  {
    fixture: "outcome.yaml",
    valid: 1,
    errors: [
      `${DIR}/outcome.yaml: not-a-mapping.count_when: must be a mapping such as { status: [401, 403] }, { status: 5xx } or { header: X-Name }, got 401`,
      `${DIR}/outcome.yaml: bad-status.count_when.status: must be an HTTP status (100 to 599), a class such as 5xx, or a non-empty list of them, got "6xx"`,
      `${DIR}/outcome.yaml: bad-status.count_when.body: unknown key (count_when takes status and header)`,
      `${DIR}/outcome.yaml: bad-header.cost_header: must be a response header name such as X-Cost, got "X Cost"`,
      `${DIR}/outcome.yaml: bad-header.block_for: must be a duration such as 30s, 10min or h, got 10`,
      `${DIR}/outcome.yaml: queue.count_when: this algorithm shapes requests before they go on; it cannot charge them after the origin answers`,
      `${DIR}/outcome.yaml: counted-denials.cost_header: cannot be used with count_denied: true (a refused request has no response to count)`,
      `${DIR}/outcome.yaml: local.block_for: needs scope: global (the key's Durable Object counts responses and holds bans); this rule is scope: local`,
      `${DIR}/outcome.yaml: leased.block_for: cannot be used with lease (an isolate admitting from a lease would not see a ban or a late charge)`,
    ],
  },
  {
    fixture: "leaky-queue-delay.yaml",
    valid: 0,
    errors: [
      `${DIR}/leaky-queue-delay.yaml: too-much-delay.delay: must be at most burst (20), got 21`,
      `${DIR}/leaky-queue-delay.yaml: both.nodelay: give delay or nodelay, not both`,
      `${DIR}/leaky-queue-delay.yaml: nodelay-not-bool.nodelay: must be true or false, got "yes"`,
    ],
  },
  {
    fixture: "many-errors.yaml",
    valid: 0,
    errors: [
      `${DIR}/many-errors.yaml:2:7: free-global (rules[0]).id: duplicate id: rules[4] (line 21) has it too; ids are unique`,
      `${DIR}/many-errors.yaml: free-global (rules[0]).limit: not a parameter of token_bucket (token_bucket takes rate_per_s or rate, and burst)`,
      `${DIR}/many-errors.yaml: free-global (rules[0]).burst: must be a positive integer, got "20x"`,
      `${DIR}/many-errors.yaml: labels-bulk.rate_limit: unknown key`,
      `${DIR}/many-errors.yaml: labels-bulk.cost_by_route["POST /v1/labels:batch"]: cost 30 is more than the rule's capacity 20 (burst); such a request could never be admitted`,
      `${DIR}/many-errors.yaml: login-per-ip.limit: must be a positive integer, got 0`,
      `${DIR}/many-errors.yaml:20:3: rules[3]: must be a mapping with id, match and algorithm, got "just a string"`,
      `${DIR}/many-errors.yaml:21:7: free-global (rules[4]).id: duplicate id: rules[0] (line 2) has it too; ids are unique`,
    ],
  },
  {
    fixture: "missing-param.yaml",
    valid: 0,
    errors: [
      `${DIR}/missing-param.yaml:1:3: free-global.burst: required for token_bucket`,
      `${DIR}/missing-param.yaml:6:10: daily.match.identity: required: one of api_key, ip, user (or a key: at the rule's top level)`,
      `${DIR}/missing-param.yaml:5:3: daily.window_s: required for fixed_window (or window: "<duration>")`,
      `${DIR}/missing-param.yaml:9:3: rules[2].id: required`,
      `${DIR}/missing-param.yaml:13:3: no-algorithm.algorithm: required: one of token_bucket, gcra, leaky_bucket, leaky_queue, fixed_window, sliding_log, sliding_counter, concurrency`,
      `${DIR}/missing-param.yaml:16:3: no-match.match: required, e.g. { plan: free, identity: api_key }`,
    ],
  },
  {
    fixture: "non-integer.yaml",
    valid: 0,
    errors: [
      `${DIR}/non-integer.yaml: free-global.rate_per_s: must be a positive integer, got 1.5`,
      `${DIR}/non-integer.yaml: free-global.burst: must be a positive integer, got "20x"`,
      `${DIR}/non-integer.yaml: free-global.cost: must be a positive integer, got true`,
      `${DIR}/non-integer.yaml: free-global.timeout_ms: must be a positive integer, got 1.0`,
      `${DIR}/non-integer.yaml: daily.limit: must be a positive integer, got "10000"`,
      `${DIR}/non-integer.yaml: daily.window_s: must be a positive integer, got 1e3`,
      `${DIR}/non-integer.yaml: daily.retry_jitter_s: must be an integer >= 0, got 0.5`,
    ],
  },
  {
    fixture: "non-positive.yaml",
    valid: 0,
    errors: [
      `${DIR}/non-positive.yaml: free-global.rate_per_s: must be a positive integer, got 0`,
      `${DIR}/non-positive.yaml: free-global.burst: must be a positive integer, got -20`,
      `${DIR}/non-positive.yaml: free-global.cost: must be a positive integer, got 0`,
      `${DIR}/non-positive.yaml: free-global.retry_jitter_s: must be an integer >= 0, got -1`,
      `${DIR}/non-positive.yaml: queue.delay: must be an integer >= 0, got -1`,
    ],
  },
  {
    fixture: "not-a-list.yaml",
    valid: 0,
    errors: [`${DIR}/not-a-list.yaml: the top level must be a list of rules ("- id: ..."), got a mapping`],
  },
  {
    fixture: "not-a-mapping.yaml",
    valid: 1,
    errors: [
      `${DIR}/not-a-mapping.yaml:1:3: rules[0]: must be a mapping with id, match and algorithm, got "free-global"`,
    ],
  },
  {
    fixture: "rate-both.yaml",
    valid: 0,
    errors: [
      `${DIR}/rate-both.yaml: free-global.rate: give rate_per_s or rate, not both`,
      `${DIR}/rate-both.yaml: login-per-ip.window: give window_s or window, not both`,
    ],
  },
  {
    fixture: "bad-unverified.yaml",
    valid: 1,
    errors: [
      `${DIR}/bad-unverified.yaml: keyed.unverified: must be one of by_address, skip, reject, got "by_ip"`,
      `${DIR}/bad-unverified.yaml: per-address.unverified: only rules with identity: api_key have unverified callers; this one has identity: ip`,
    ],
  },
  {
    fixture: "unknown-key.yaml",
    valid: 0,
    errors: [
      `${DIR}/unknown-key.yaml: free-global.brust: unknown key; did you mean "burst"?`,
      `${DIR}/unknown-key.yaml: free-global.on-error: unknown key; did you mean "on_error"?`,
      `${DIR}/unknown-key.yaml: free-global.identity: unknown key; identity belongs inside match: { identity: ... }`,
      `${DIR}/unknown-key.yaml: free-global.colour: unknown key`,
      `${DIR}/unknown-key.yaml:2:12: free-global.match.plans: unknown key; did you mean "plan"?`,
    ],
  },
  {
    fixture: "window-month.yaml",
    valid: 0,
    errors: [
      `${DIR}/window-month.yaml: monthly-log.window: month is only for fixed_window; sliding_log needs a fixed length such as 30d`,
      `${DIR}/window-month.yaml: monthly-counter.window: month is only for fixed_window; sliding_counter needs a fixed length such as 30d`,
      `${DIR}/window-month.yaml: monthly-counter.count_denied: must be true or false, got 1`,
    ],
  },
  {
    fixture: "yaml-syntax.yaml",
    valid: 0,
    errors: [`${DIR}/yaml-syntax.yaml:2:10: "{" is never closed`],
  },
];

describe("bad rule files: one fixture per error, exact messages", () => {
  it.each(FIXTURES)("$fixture", ({ fixture, valid, errors }) => {
    const result = loadRules([`${DIR}/${fixture}`]);
    expect(result.errors).toEqual(errors);
    expect(result.rules).toHaveLength(valid);
  });

  it("covers every fixture in the directory", () => {
    const listed = new Set(FIXTURES.map((f) => f.fixture));
    const onDisk = loadRules([DIR]).files.map((f) => f.file.slice(DIR.length + 1));
    for (const file of onDisk) expect(listed.has(file)).toBe(true);
  });
});

/** Parse one rule written as YAML lines (indented as a list item), expecting no errors. */
function one(yaml: string): ResolvedRule {
  const { rules, errors } = parseRules(yaml, "t.yaml");
  expect(errors).toEqual([]);
  expect(rules).toHaveLength(1);
  return rules[0]!;
}

function errorsOf(yaml: string): string[] {
  return parseRules(yaml, "t.yaml").errors;
}

describe("the shipped example (test/fixtures/shipped/shiplane.yaml)", () => {
  const result = loadRules([SHIPPED]);
  const byId = new Map(result.rules.map((r) => [r.id, r]));

  it("validates with zero errors", () => {
    expect(result.errors).toEqual([]);
    expect(result.files).toEqual([{ file: SHIPPED, count: result.rules.length + result.denies.length }]);
    expect(result.denies.map((d) => d.id)).toEqual(["admin-office-only"]);
  });

  it("exercises every algorithm and a shadow rule", () => {
    expect(new Set(result.rules.map((r) => r.algorithm))).toEqual(
      new Set([
        "token_bucket",
        "gcra",
        "leaky_bucket",
        "leaky_queue",
        "fixed_window",
        "sliding_log",
        "sliding_counter",
        "concurrency",
      ]),
    );
    expect(result.rules.some((r) => r.mode === "shadow")).toBe(true);
    for (const r of result.rules) {
      if (r.match.route !== null) expect(r.match.route.segments[0]).toBe("v1");
    }
  });

  it("resolves Shiplane's free-global rule with every default filled in", () => {
    expect(byId.get("free-global")).toEqual({
      id: "free-global",
      file: SHIPPED,
      match: { plans: ["free"], route: null, moreRoutes: [], except: [], identity: "api_key" },
      mode: "enforce",
      scope: "global",
      onError: "open",
      unverified: "by_address",
      timeoutMs: 250,
      status: 429,
      cost: 1,
      costByRoute: [],
      retryJitterS: 0,
      lease: null,
      description: "Free plan per API key; also anonymous and unknown callers, by address",
      key: null,
      keyMissing: "empty",
      keyClientChosen: "warn",
      countWhen: null,
      costHeader: null,
      blockForMs: null,
      algorithm: "token_bucket",
      rate: { amount: 10, periodMs: 1000, tokens: 1, perMs: 100 },
      burst: 20,
    });
  });

  it("resolves labels-bulk's route and per-route cost", () => {
    const route = { source: "POST /v1/labels:batch", method: "POST", segments: ["v1", "labels:batch"] };
    const rule = byId.get("labels-bulk")!;
    expect(rule.match.route).toEqual(route);
    expect(rule.costByRoute).toEqual([{ route, cost: 10 }]);
  });

  it("resolves login-per-ip, the daily and monthly quotas, the queue and the sliding counter", () => {
    expect(byId.get("login-per-ip")).toMatchObject({ algorithm: "sliding_log", limit: 5, windowMs: 60_000 });
    expect(byId.get("free-daily")).toMatchObject({
      algorithm: "fixed_window",
      limit: 10_000,
      window: { kind: "ms", ms: 86_400_000 },
    });
    expect(byId.get("scale-monthly")).toMatchObject({ algorithm: "fixed_window", window: { kind: "month" } });
    const queue = byId.get("carrier-sync-shaping")!;
    expect(queue).toMatchObject({ algorithm: "leaky_queue", burst: 20, delay: 5, onError: "closed", timeoutMs: 250 });
    expect(capacityOf(queue)).toBe(21);
    expect(byId.get("anon-per-ip")).toMatchObject({
      algorithm: "sliding_counter",
      limit: 300,
      windowMs: 60_000,
      countDenied: true,
      retryJitterS: 3,
    });
    expect(byId.get("free-tracking-shadow")).toMatchObject({ mode: "shadow", scope: "local" });
  });

  it("is plain JSON data: it survives a JSON round trip unchanged", () => {
    expect(JSON.parse(JSON.stringify(result.rules))).toEqual(result.rules);
  });
});

describe("resolution details", () => {
  const head = "- id: r\n  match: { identity: ip }\n";

  it("nodelay resolves to delay = burst; delay defaults to 0", () => {
    const q = `${head}  algorithm: leaky_queue\n  rate: 10/s\n  burst: 20\n`;
    expect(one(`${q}  nodelay: true\n`)).toMatchObject({ delay: 20 });
    expect(one(q)).toMatchObject({ delay: 0 });
    expect(one(`${q}  delay: 20\n`)).toMatchObject({ delay: 20 });
  });

  it("plan lists, method case and the order of cost_by_route are kept", () => {
    const rule = one(
      '- id: r\n  match: { plan: [free, growth], route: "post /v1/labels", identity: user }\n' +
        "  algorithm: gcra\n  rate_per_s: 5\n  burst: 10\n" +
        '  cost_by_route: { "GET /v1/**": 2, "* /v1/labels:batch": 10 }\n',
    );
    expect(rule.match.plans).toEqual(["free", "growth"]);
    expect(rule.match.route).toEqual({ source: "post /v1/labels", method: "POST", segments: ["v1", "labels"] });
    expect(rule.costByRoute.map((c) => [c.route.source, c.cost])).toEqual([
      ["GET /v1/**", 2],
      ["* /v1/labels:batch", 10],
    ]);
  });

  it("count_denied defaults to false; status and retry_jitter_s take their edge values", () => {
    const rule = one(
      `${head}  algorithm: sliding_counter\n  limit: 100\n  window: min\n  status: 599\n  retry_jitter_s: 0\n`,
    );
    expect(rule).toMatchObject({ countDenied: false, status: 599, retryJitterS: 0 });
    expect(one(`${head}  algorithm: gcra\n  rate: 1/s\n  burst: 1\n  status: 400\n`).status).toBe(400);
  });

  it("count_when, cost_header and block_for resolve to exact values; a single status becomes a list", () => {
    const rule = one(
      `${head}  algorithm: sliding_log\n  limit: 5\n  window: 10min\n` +
        "  count_when: { status: [401, 5xx], header: X-Login-Failed }\n  cost_header: X-Cost\n  block_for: 2h\n",
    );
    expect(rule).toMatchObject({
      countWhen: { status: [401, "5xx"], header: "X-Login-Failed" },
      costHeader: "X-Cost",
      blockForMs: 7_200_000,
    });
    const single = one(`${head}  algorithm: fixed_window\n  limit: 5\n  window: min\n  count_when: { status: 404 }\n`);
    expect(single.countWhen).toEqual({ status: [404], header: null });
    expect(single).toMatchObject({ costHeader: null, blockForMs: null });
  });

  it("a cost equal to the capacity is allowed", () => {
    expect(one(`${head}  algorithm: leaky_queue\n  rate: 1/s\n  burst: 4\n  cost: 5\n`).cost).toBe(5);
    expect(one(`${head}  algorithm: sliding_log\n  limit: 5\n  window: min\n  cost: 5\n`).cost).toBe(5);
  });

  it("an empty list is zero rules, not an error", () => {
    expect(parseRules("[]\n", "t.yaml")).toEqual({ rules: [], denies: [], errors: [], warnings: [] });
  });

  it("YAML aliases resolve like their anchors", () => {
    const rules = parseRules(
      "- id: a\n  match: &m { plan: free, identity: api_key }\n  algorithm: gcra\n  rate: 1/s\n  burst: 1\n" +
        "- id: b\n  match: *m\n  algorithm: gcra\n  rate: 1/s\n  burst: 1\n",
      "t.yaml",
    );
    expect(rules.errors).toEqual([]);
    expect(rules.rules[1]!.match).toEqual(rules.rules[0]!.match);
  });

  it("never throws on garbage", () => {
    for (const text of [
      "",
      "---\n",
      "- 1\n- [\n",
      "{a: b}",
      "- - - x",
      "- id: [1, 2]\n",
      "\t- x",
      "- !!binary aGk=\n",
    ]) {
      const { errors } = parseRules(text, "t.yaml");
      expect(errors.length).toBeGreaterThan(0);
    }
  });
});

describe("match.route as a list, match.except", () => {
  const rule = `- id: r
  match: { route: ["* /v1/search/**", "* /**"], except: "* /v1/login**", identity: ip }
  algorithm: leaky_queue
  rate: 10/s
  burst: 0
`;

  it("resolve to the first route, the others, and the exceptions", () => {
    const m = one(rule).match;
    expect([m.route?.source, m.moreRoutes.map((r) => r.source), m.except.map((r) => r.source)]).toEqual([
      "* /v1/search/**",
      ["* /**"],
      ["* /v1/login**"],
    ]);
  });

  it.each([
    [
      "match: { route: [], identity: ip }",
      'match.route: must be "METHOD /path" or a non-empty list of them, got an empty list',
    ],
    [
      'match: { route: ["* /a", "/b"], identity: ip }',
      'match.route[1]: must be "METHOD /path", e.g. "POST /v1/labels:batch", got "/b"',
    ],
    ["match: { except: [3], identity: ip }", 'match.except[0]: must be "METHOD /path", got 3'],
    ['match: { excpt: "* /a", identity: ip }', "match.excpt: unknown key"],
  ])("%s: %s", (match, error) => {
    const errors = errorsOf(`- id: r\n  ${match}\n  algorithm: gcra\n  rate: 1/s\n  burst: 1\n`);
    expect(
      errors.some((e) => /^t\.yaml(:\d+:\d+)?: r\./.test(e) && e.includes(`r.${error}`)),
      errors.join("\n"),
    ).toBe(true);
  });
});

describe("exactness bounds at their edges", () => {
  const head = "- id: r\n  match: { identity: ip }\n";

  it("burst × perMs may equal 2^50 but not pass it", () => {
    expect(one(`${head}  algorithm: token_bucket\n  rate: 1/ms\n  burst: 1125899906842624\n`)).toMatchObject({
      burst: 2 ** 50,
    });
    expect(errorsOf(`${head}  algorithm: token_bucket\n  rate: 1/2ms\n  burst: 562949953421313\n`)).toEqual([
      "t.yaml: r.burst: burst × rate period is too large for exact arithmetic (max 2^50); " +
        "use a shorter period or a smaller burst (562949953421313 × 2 ms)",
    ]);
    // leaky_queue's capacity is burst + 1.
    expect(errorsOf(`${head}  algorithm: leaky_queue\n  rate: 1/ms\n  burst: 1125899906842624\n`)).toEqual([
      "t.yaml: r.burst: (burst + 1) × rate period is too large for exact arithmetic (max 2^50); " +
        "use a shorter period or a smaller burst (1125899906842625 × 1 ms)",
    ]);
  });

  it("the bound uses the reduced period: 1000/d is 1 token per 86400 ms", () => {
    const rule = one(`${head}  algorithm: gcra\n  rate: 1000/d\n  burst: 13000000000\n`);
    expect(rule).toMatchObject({ rate: { amount: 1000, periodMs: 86_400_000, tokens: 1, perMs: 86_400 } });
  });

  it("limit × window applies to the sliding windows; a fixed window only counts", () => {
    expect(errorsOf(`${head}  algorithm: sliding_log\n  limit: 13031249\n  window: d\n`)).toEqual([
      "t.yaml: r.limit: limit × window is too large for exact arithmetic (max 2^50); " +
        "use a shorter window or a smaller limit (13031249 × 86400000 ms)",
    ]);
    expect(one(`${head}  algorithm: sliding_log\n  limit: 13031248\n  window: d\n`)).toMatchObject({ limit: 13031248 });
    expect(one(`${head}  algorithm: fixed_window\n  limit: 2000000000\n  window: month\n`)).toMatchObject({
      limit: 2_000_000_000,
    });
  });

  it("a window or period may be 2^40 ms but no longer", () => {
    expect(one(`${head}  algorithm: fixed_window\n  limit: 1\n  window: 1099511627776ms\n`)).toMatchObject({
      window: { kind: "ms", ms: 2 ** 40 },
    });
    expect(errorsOf(`${head}  algorithm: fixed_window\n  limit: 1\n  window: 1099511627777ms\n`)).toEqual([
      't.yaml: r.window: "1099511627777ms" is too long (max 2^40 ms, about 34 years)',
    ]);
  });
});

describe("loadRules", () => {
  it("reads a directory's *.yaml and *.yml files, sorted, and reports ids defined twice across files", () => {
    const result = loadRules([`${DIR}/dup-dir`]);
    expect(result.files).toEqual([
      { file: `${DIR}/dup-dir/a.yaml`, count: 1 },
      { file: `${DIR}/dup-dir/b.yml`, count: 1 },
    ]);
    expect(result.errors).toEqual([
      `${DIR}/dup-dir/b.yml: free-global.id: duplicate id (first defined in ${DIR}/dup-dir/a.yaml)`,
    ]);
    expect(result.rules.map((r) => [r.id, r.file])).toEqual([
      ["free-global", `${DIR}/dup-dir/a.yaml`],
      ["growth-daily", `${DIR}/dup-dir/b.yml`],
    ]);
  });

  it("reads a file named twice once", () => {
    const result = loadRules([`${DIR}/dup-dir/a.yaml`, `${DIR}/dup-dir`]);
    expect(result.files.map((f) => f.file)).toEqual([`${DIR}/dup-dir/a.yaml`, `${DIR}/dup-dir/b.yml`]);
  });

  it("reports a missing path and keeps going", () => {
    const result = loadRules([`${DIR}/nope.yaml`, "test/fixtures/shipped"]);
    expect(result.errors).toEqual([`${DIR}/nope.yaml: cannot read: no such file or directory`]);
    expect(result.rules.length).toBeGreaterThan(0);
  });

  it("parseRules on the file's text gives the same rules", () => {
    const text = readFileSync(SHIPPED, "utf8");
    expect(parseRules(text, SHIPPED).rules).toEqual(loadRules([SHIPPED]).rules);
  });
});

describe("one typo, one message", () => {
  it("a misspelt algorithm does not hide its fields' problems: they are checked as the likeliest algorithm's", () => {
    const yaml = "- id: a\n  match: { identity: ip }\n  algorithm: gcar\n  rate: 10/x\n  burst: -1\n";
    const { errors } = parseRules(yaml, "f.yaml");
    expect(errors[0]).toMatch(/^f\.yaml: a\.algorithm: must be one of .*, got "gcar"; did you mean "gcra"\?$/);
    expect(errors.slice(1)).toEqual([
      expect.stringMatching(/^f\.yaml: a\.rate: bad period in rate "10\/x"/),
      "f.yaml: a.burst: must be a positive integer, got -1",
    ]);
    // Nothing near: only the algorithm is reported, as before.
    const far = parseRules(yaml.replace("gcar", "zzzzzzzz"), "f.yaml").errors;
    expect(far).toHaveLength(1);
  });

  it("a misspelt required parameter is reported once, as the typo, not also as missing", () => {
    const yaml = "- id: a\n  match: { identity: ip }\n  algorithm: token_bucket\n  rate_per_s: 10\n  brust: 20\n";
    expect(parseRules(yaml, "f.yaml").errors).toEqual(['f.yaml: a.brust: unknown key; did you mean "burst"?']);
    const missing = "- id: a\n  match: { identity: ip }\n  algorithm: token_bucket\n  rate_per_s: 10\n";
    expect(parseRules(missing, "f.yaml").errors).toEqual(["f.yaml:1:3: a.burst: required for token_bucket"]);
  });
});
