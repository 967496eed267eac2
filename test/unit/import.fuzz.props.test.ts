/**
 * The importers, on configurations damaged at random (a line dropped or doubled, a word replaced by something odd,
 * a byte that looks like a space and is not), end with a result or with their own error naming the place: never a
 * TypeError, a stack overflow or a run out of memory. A README fed to `sluice import nginx` once ran it out of memory
 * (a no-break space the tokenizer never moved past); this is the net under that kind of bug. A run by hand over the
 * public corpus (15,000 damaged files, docs/testing.md "The importer corpus") found that one and nothing else.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AwsImportError, importAwsWaf } from "../../src/migrate/aws_import.ts";
import { EnvoyImportError } from "../../src/migrate/envoy_file.ts";
import { importEnvoy } from "../../src/migrate/envoy_import.ts";
import { parseMapping } from "../../src/migrate/envoy_mapping.ts";
import { NginxImportError, NginxSyntaxError, readNginxConfig } from "../../src/migrate/nginx_conf.ts";
import { withZonesElsewhere } from "../../src/migrate/nginx_elsewhere.ts";
import { importNginx } from "../../src/migrate/nginx_import.ts";

const NGINX = `events {}
http {
    map $uri $limited { default $binary_remote_addr; /health ""; }
    limit_req_zone $limited zone=api:10m rate=10r/s;
    limit_req_zone $binary_remote_addr$uri zone=per_path:10m rate=30r/m;
    limit_conn_zone $binary_remote_addr zone=conn:10m;
    limit_req_status 429;
    server {
        listen 80;
        server_name api.example.com;
        limit_req zone=api burst=20 nodelay;
        location = /v1/login { limit_req zone=per_path burst=5 delay=2; limit_conn conn 3; }
        location ~ ^/v1/users/[0-9]+$ { limit_req_dry_run on; limit_req zone=api; }
        location /static/ { return 200 "ok"; }
    }
}
`;

const SERVICE = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 100 }
  - key: generic_key
    value: search
    shadow_mode: true
    descriptors:
      - key: remote_address
        rate_limit: { unit: second, requests_per_unit: 5, name: search }
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: { unit: hour, requests_per_unit: 1000 }
`;

const LOCAL = `stat_prefix: http_local
token_bucket: { max_tokens: 100, tokens_per_fill: 10, fill_interval: 1s }
filter_enabled: { default_value: { numerator: 100, denominator: HUNDRED } }
filter_enforced: { default_value: { numerator: 50, denominator: HUNDRED } }
status: { code: ServiceUnavailable }
descriptors:
  - entries: [{ key: remote_address }]
    token_bucket: { max_tokens: 5, fill_interval: 0.5s }
`;

const AWS_WAF = JSON.stringify(
  {
    WebACL: {
      Rules: [
        {
          Name: "login",
          Statement: {
            RateBasedStatement: {
              Limit: 100,
              EvaluationWindowSec: 300,
              AggregateKeyType: "CUSTOM_KEYS",
              CustomKeys: [
                { Header: { Name: "x-tenant", TextTransformations: [{ Priority: 0, Type: "NONE" }] } },
                { IP: {} },
              ],
              ScopeDownStatement: {
                AndStatement: {
                  Statements: [
                    {
                      ByteMatchStatement: {
                        SearchString: "/login",
                        FieldToMatch: { UriPath: {} },
                        TextTransformations: [{ Priority: 0, Type: "NONE" }],
                        PositionalConstraint: "EXACTLY",
                      },
                    },
                    { NotStatement: { Statement: { GeoMatchStatement: { CountryCodes: ["US", "CA"] } } } },
                  ],
                },
              },
            },
          },
          Action: { Block: { CustomResponse: { ResponseCode: 429 } } },
        },
        {
          Name: "all",
          Statement: { RateBasedStatement: { Limit: 10, AggregateKeyType: "IP" } },
          Action: { Count: {} },
        },
      ],
    },
  },
  null,
  2,
);

const ODD = [
  "1.5",
  "-1",
  "0",
  "yes",
  "{",
  "}",
  ";",
  "''",
  '"',
  "zone=",
  "burst=",
  "rate=",
  "99999999999999999999",
  "~",
  "null",
  "[a]",
  "{a: 1}",
  "*",
  "$uri",
  "off",
  "0x10",
  "1e3",
  ":",
  "- x",
  "\u00a0",
  "\ufeff",
  "\\",
  "$" + "{x}",
  "#",
];

/** A damage to a text: per step, drop a line, double it, or replace one of its words. */
const damage = fc.array(
  fc.tuple(fc.nat(), fc.constantFrom("drop", "double", "word"), fc.nat(), fc.constantFrom(...ODD)),
  { minLength: 1, maxLength: 4 },
);

function damaged(text: string, steps: readonly (readonly [number, string, number, string])[]): string {
  const lines = text.split("\n");
  for (const [at, how, word, odd] of steps) {
    const i = at % lines.length;
    if (how === "drop") lines.splice(i, 1);
    else if (how === "double") lines.splice(i, 0, lines[i] ?? "");
    else {
      const words = (lines[i] ?? "").split(/( +)/);
      words[word % Math.max(1, words.length)] = odd;
      lines[i] = words.join("");
    }
    if (lines.length === 0) lines.push("");
  }
  return lines.join("\n");
}

const mapping = (() => {
  const m = parseMapping([]);
  if (!("mapping" in m)) throw new Error("the default mapping parses");
  return m.mapping;
})();

describe("importers on damaged configurations: a result or their own error, never a crash", () => {
  it("sluice import nginx", () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-fuzz-nginx-"));
    const path = join(dir, "nginx.conf");
    fc.assert(
      fc.property(damage, (steps) => {
        writeFileSync(path, damaged(NGINX, steps));
        try {
          const config = readNginxConfig(path);
          importNginx(withZonesElsewhere(config, path, undefined).config);
        } catch (error) {
          expect(error instanceof NginxImportError || error instanceof NginxSyntaxError, String(error)).toBe(true);
          // Where, or (a file damaged past any http, server or zone) that there is nothing to import.
          expect(String((error as Error).message)).toMatch(/nginx\.conf|^no http \{ \.\.\. \} block/);
        }
      }),
      { numRuns: 300, seed: 20261207 },
    );
  });

  it("sluice import envoy: the service's configuration and the local filter", () => {
    fc.assert(
      fc.property(fc.constantFrom(SERVICE, LOCAL), damage, (text, steps) => {
        try {
          importEnvoy(damaged(text, steps), "ratelimit.yaml", mapping);
        } catch (error) {
          expect(error instanceof EnvoyImportError, String((error as Error).stack)).toBe(true);
          expect(String((error as Error).message)).toMatch(/ratelimit\.yaml/);
        }
      }),
      { numRuns: 400, seed: 20261207 },
    );
  });

  it("sluice import aws-waf: a damaged file, or a value of the wrong kind anywhere", () => {
    const values = fc.constantFrom<unknown>(null, 0, -1, 1.5, 1e20, "", "x", "EXACTLY", [], [1], {}, { a: 1 }, true);
    fc.assert(
      fc.property(damage, fc.array(fc.tuple(fc.nat(), values), { maxLength: 3 }), (steps, swaps) => {
        const texts = [damaged(AWS_WAF, steps), swapped(AWS_WAF, swaps)];
        for (const text of texts) {
          try {
            importAwsWaf(text, "acl.json");
          } catch (error) {
            expect(error instanceof AwsImportError, String((error as Error).stack)).toBe(true);
            expect(String((error as Error).message)).toMatch(/^acl\.json:\d+:\d+: /);
          }
        }
      }),
      { numRuns: 300, seed: 20261207 },
    );
  });
});

/** `text` (JSON) with the values at some places (the n-th value, depth first) replaced. */
function swapped(text: string, swaps: readonly (readonly [number, unknown])[]): string {
  const root = JSON.parse(text) as unknown;
  for (const [n, value] of swaps) {
    const places: [Record<string, unknown> | unknown[], string | number][] = [];
    const walk = (v: unknown) => {
      if (typeof v !== "object" || v === null) return;
      for (const [k, child] of Object.entries(v)) {
        places.push([v as Record<string, unknown>, Array.isArray(v) ? Number(k) : k]);
        walk(child);
      }
    };
    walk(root);
    const place = places[n % Math.max(1, places.length)];
    if (place !== undefined) (place[0] as Record<string | number, unknown>)[place[1]] = structuredClone(value);
  }
  return JSON.stringify(root, null, 2);
}
