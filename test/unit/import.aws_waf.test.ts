/**
 * `sluice import aws-waf`: rate-based rules with the rule each must give, the parts each refusal names, malformed
 * files with their errors, and the command's exit status and output.
 */
import { describe, expect, it } from "vitest";
import { imported, keyed, kinds, line, path, rule, tt } from "../support/aws_waf.ts";

describe("AWS WAF rate-based rules: the limit, the window, the action", () => {
  it.each([
    ["Block: AWS's 403", rule(), "r * ip limit=100 window=min status=403"],
    [
      "Block with 429",
      rule({ Action: { Block: { CustomResponse: { ResponseCode: 429 } } } }),
      "r * ip limit=100 window=min",
    ],
    [
      "Block with 503",
      rule({ Action: { Block: { CustomResponse: { ResponseCode: 503 } } } }),
      "r * ip limit=100 window=min status=503",
    ],
    ["Count: shadow", rule({ Action: { Count: {} } }), "r * ip limit=100 window=min mode=shadow"],
    ["Captcha: enforced", rule({ Action: { Captcha: {} } }), "r * ip limit=100 window=min"],
    ["Challenge: enforced", rule({ Action: { Challenge: {} } }), "r * ip limit=100 window=min"],
    [
      "no EvaluationWindowSec: AWS's 300",
      rule({}, { EvaluationWindowSec: undefined }),
      "r * ip limit=100 window=5min status=403",
    ],
    [
      "600 s",
      rule({}, { EvaluationWindowSec: 600, Limit: 1000000000 }),
      "r * ip limit=1000000000 window=10min status=403",
    ],
  ])("%s", (_, r, want) => {
    expect(imported(r).rules.map(line)).toEqual([want]);
  });

  it("is a sliding_counter in 10-second sub-windows that counts what it refuses", () => {
    const fields = imported(rule({}, { EvaluationWindowSec: 120 })).rules[0]!.fields;
    expect(fields.slice(0, 5)).toEqual([
      ["algorithm", "sliding_counter"],
      ["limit", 100],
      ["window", "2min"],
      ["buckets", 12],
      ["count_denied", true],
    ]);
  });

  it("says a challenge is refused instead, and AWS's check every 10 s, as approximate", () => {
    const result = imported(rule({ Action: { Challenge: {} } }));
    expect(kinds(result, "approximate")).toEqual([
      expect.stringMatching(/^action Challenge: Sluice refuses \(429\) where AWS would challenge/),
      expect.stringMatching(/^AWS WAF checks each rate about every 10 s/),
    ]);
  });

  // A Block without a rate is a deny rule (import.aws_waf_block.test.ts); these two cannot be said: noted, no rule.
  it("notes the custom body and headers, and blocks without a rate that a match cannot say", () => {
    const block = { Block: { CustomResponse: { ResponseCode: 429, CustomResponseBodyKey: "b", ResponseHeaders: [] } } };
    const plain = { Name: "sqli", Statement: { SqliMatchStatement: {} }, Action: { Block: {} } };
    const ips = { Name: "ips", Statement: { IPSetReferenceStatement: { ARN: "arn:x" } }, Action: { Block: {} } };
    const result = imported(rule({ Action: block }), plain, ips);
    expect(result.rules.map((r) => r.id)).toEqual(["r"]);
    expect(kinds(result, "note")).toEqual([
      expect.stringMatching(/^Sluice counts an IPv6 client by its \/64/),
      expect.stringMatching(/^its custom response body/),
      expect.stringMatching(/^its response headers/),
      expect.stringMatching(
        /^a Block without a rate, not a rate limit; as a deny rule: .*SqliMatchStatement.*; so no rule$/,
      ),
      expect.stringMatching(
        /^a Block without a rate.*the IP set arn:x is kept in AWS: give its addresses with --ip-set FILE/,
      ),
    ]);
    expect(kinds(result, "left out")).toEqual([]);
  });
});

describe("the aggregation: identity ip, global, key parts", () => {
  it.each([
    ["IP", rule(), "r * ip limit=100 window=min status=403"],
    [
      "FORWARDED_IP: the connecting address (approximate)",
      rule(
        {},
        {
          AggregateKeyType: "FORWARDED_IP",
          ForwardedIPConfig: { HeaderName: "X-Forwarded-For", FallbackBehavior: "MATCH" },
        },
      ),
      "r * ip limit=100 window=min status=403",
    ],
    [
      "a header and the address: missing parts skipped",
      keyed({ Header: { Name: "X-Tenant", TextTransformations: tt("NONE") } }, { IP: {} }),
      "r * key={ header: x-tenant }+ip limit=100 window=min status=403 key_missing=skip",
    ],
    [
      "a header alone: its values accepted as AWS counted them",
      keyed({ Header: { Name: "x-tenant", TextTransformations: tt("NONE") } }),
      "r * key={ header: x-tenant } limit=100 window=min status=403 key_missing=skip key_client_chosen=accept",
    ],
    [
      "x-api-key: the verified API key (approximate)",
      keyed({ Header: { Name: "x-api-key", TextTransformations: tt("NONE") } }, { IP: {} }),
      "r * key=api_key+ip limit=100 window=min status=403 key_missing=skip",
    ],
    [
      "method, path, ASN, JA4, cookie, query argument",
      keyed(
        { HTTPMethod: {} },
        { UriPath: { TextTransformations: tt("NONE") } },
        { ASN: {} },
        { Cookie: { Name: "sid", TextTransformations: tt("NONE") } },
        { QueryArgument: { Name: "city", TextTransformations: tt("NONE") } },
      ),
      "r * key=method+path+asn+{ cookie: sid }+{ query: city } limit=100 window=min status=403 key_missing=skip",
    ],
    ["IP alone as a custom key: identity ip", keyed({ IP: {} }), "r * ip limit=100 window=min status=403"],
  ])("%s", (_, r, want) => {
    expect(imported(r).rules.map(line)).toEqual([want]);
  });

  it("CONSTANT is key: global", () => {
    const r = rule({}, { AggregateKeyType: "CONSTANT", ScopeDownStatement: path("/search", "STARTS_WITH") });
    expect(imported(r).rules.map(line)).toEqual(["r * /search** key=global limit=100 window=min status=403"]);
  });

  it.each([
    [
      "FORWARDED_IP",
      rule({}, { AggregateKeyType: "FORWARDED_IP", ForwardedIPConfig: { HeaderName: "X-Forwarded-For" } }),
      /^AWS counts by the first address in X-Forwarded-For; Sluice by CF-Connecting-IP/,
    ],
    [
      "a transformed header",
      keyed({ Header: { Name: "x-t", TextTransformations: tt("LOWERCASE") } }, { IP: {} }),
      /^AWS counts header x-t after LOWERCASE; Sluice counts the value as sent/,
    ],
    [
      "the path",
      keyed({ UriPath: { TextTransformations: tt("NONE") } }, { IP: {} }),
      /^Sluice counts the canonical path/,
    ],
  ])("%s is approximate", (_, r, message) => {
    expect(kinds(imported(r), "approximate")[0]).toMatch(message);
  });

  it.each([
    [
      "QueryString",
      { QueryString: { TextTransformations: tt("NONE") } },
      "the custom key QueryString: the whole query string: a key part is one query argument (QueryArgument)",
    ],
    [
      "LabelNamespace",
      { LabelNamespace: { Namespace: "awswaf:managed:" } },
      "the custom key LabelNamespace: labels are set by AWS WAF's other rules, which Sluice does not see",
    ],
    [
      "JA3Fingerprint",
      { JA3Fingerprint: { FallbackBehavior: "MATCH" } },
      "the custom key JA3Fingerprint: Sluice keys have no JA3 part (ja4 is one)",
    ],
    [
      "a Cookie header",
      { Header: { Name: "Cookie", TextTransformations: tt("NONE") } },
      'the custom key Header "Cookie": not a header name a key part takes',
    ],
  ])("%s is left out", (_, key, message) => {
    const result = imported(keyed(key, { IP: {} }));
    expect(result.rules).toEqual([]);
    expect(kinds(result, "left out")).toEqual([message]);
  });
});
