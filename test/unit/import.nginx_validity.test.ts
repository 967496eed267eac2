/**
 * `sluice import nginx` accepts what NGINX accepts and refuses what NGINX refuses. Each row is a configuration around
 * one limiting directive with the verdict of the real NGINX 1.22 (`nginx -t`, Debian's package, which `.ci/run`
 * installs) pinned beside it: the importer must give that verdict, and the real `nginx -t` is run on the same file to
 * show that the pin is NGINX's and not a guess. The one place Sluice refuses what NGINX takes is its own bound (an
 * amount above 2^50, a concurrency above 10,000), and the message says so; the one place it takes what this NGINX
 * refuses is NGINX Plus's `sync` on a zone, which Plus takes. The real behaviour these stand for: an
 * importer that takes a configuration NGINX would not load makes rules of something that never ran, and one that
 * refuses a working configuration (`rate=10`, `limit_req_dry_run ON`) cannot be used at all.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { NginxImportError, readNginxConfig } from "../../src/migrate/nginx_conf.ts";
import { importNginx } from "../../src/migrate/nginx_import.ts";
import { nginxBinary } from "../support/nginx_origin.ts";

const ZONE = "limit_req_zone $binary_remote_addr zone=base:1m rate=10r/s;";
const CONN = "limit_conn_zone $binary_remote_addr zone=c:1m;";

/** A whole nginx.conf: `http` lines, `server` lines, and lines of `location /v1/`; `/v2/` always uses zone base. */
function config(http: string, server: string, location: string): string {
  return `events {}
http {
    ${ZONE} ${http}
    server {
        listen 127.0.0.1:8080;
        server_name api.example.com;
        ${server}
        location /v1/ {
            ${location}
            proxy_pass http://127.0.0.1:9000;
        }
        location /v2/ {
            limit_req zone=base;
            proxy_pass http://127.0.0.1:9000;
        }
    }
}
`;
}

type Verdict = "accept" | "refuse";
/** [what it is, http lines, server lines, location lines, NGINX's verdict, what Sluice's refusal says]. */
type Row = [string, string, string, string, Verdict, RegExp?];

const NGINX_REFUSES = /NGINX refuses this configuration/;

const ROWS: Row[] = [
  ["burst and nodelay", "", "", "limit_req zone=base burst=5 nodelay;", "accept"],
  ["burst and delay", "", "", "limit_req zone=base burst=5 delay=3;", "accept"],
  ["delay above burst", "", "", "limit_req zone=base burst=5 delay=10;", "accept"],
  ["delay then nodelay", "", "", "limit_req zone=base delay=3 nodelay;", "accept"],
  ["a burst with a leading zero", "", "", "limit_req zone=base burst=05;", "accept"],
  [
    "two zones in one limit_req: the last counts",
    "limit_req_zone $uri zone=b2:1m rate=10r/s;",
    "",
    "limit_req zone=base zone=b2;",
    "accept",
  ],
  ["four arguments", "", "", "limit_req zone=base burst=5 nodelay delay=3;", "refuse", /invalid number of arguments/],
  ["burst=0", "", "", "limit_req zone=base burst=0;", "refuse", /invalid burst value "burst=0"/],
  ["delay=0", "", "", "limit_req zone=base delay=0;", "refuse", /invalid delay value "delay=0"/],
  ["delay=abc", "", "", "limit_req zone=base burst=5 delay=abc;", "refuse", /invalid delay value/],
  ["burst=+5", "", "", "limit_req zone=base burst=+5;", "refuse", /invalid burst value "burst=\+5"/],
  ["burst above 2^63-1", "", "", "limit_req zone=base burst=9223372036854775808;", "refuse", /invalid burst value/],
  [
    "burst at 2^63-1: NGINX takes it, Sluice's bound is 2^50",
    "",
    "",
    "limit_req zone=base burst=9223372036854775807;",
    "refuse",
    /more than Sluice takes/,
  ],
  [
    "the same zone twice in one block",
    "",
    "",
    "limit_req zone=base; limit_req zone=base burst=3;",
    "refuse",
    /"limit_req" directive is duplicate/,
  ],
  [
    "the same zone twice in a server",
    "",
    "limit_req zone=base; limit_req zone=base;",
    "limit_req zone=base;",
    "refuse",
    /is duplicate/,
  ],
  ["no zone", "", "", "limit_req burst=5;", "refuse", /must have "zone" parameter/],
  ["no arguments", "", "", "limit_req;", "refuse", /invalid number of arguments/],
  ["an unknown parameter", "", "", "limit_req zone=base brust=5;", "refuse", /invalid parameter "brust=5"/],
  ["an unknown zone", "", "", "limit_req zone=nope;", "refuse", /no limit_req_zone defines zone "nope"/],
  [
    "limit_req in if",
    "",
    "",
    "if ($arg_x) { limit_req zone=base; }",
    "refuse",
    /"limit_req" directive is not allowed here/,
  ],
  ["limit_req in limit_except", "", "", "limit_except GET { limit_req zone=base; }", "refuse", /not allowed here/],
  [
    "a bad limit_req where return answers",
    "",
    "",
    "location /v1/x { return 200; limit_req zone=base burst=abc; }",
    "refuse",
    /invalid burst value/,
  ],
  [
    "limit_req off (no such thing) where return answers",
    "",
    "",
    "location /v1/x { return 200; limit_req off; }",
    "refuse",
    /must have "zone" parameter|invalid parameter/,
  ],
  [
    "a rate without a unit is per second",
    "limit_req_zone $uri zone=b2:1m rate=10;",
    "",
    "limit_req zone=b2;",
    "accept",
  ],
  ["a rate per minute", "limit_req_zone $uri zone=b2:1m rate=1000000r/m;", "", "limit_req zone=b2;", "accept"],
  [
    "rate=0r/s",
    "limit_req_zone $uri zone=b2:1m rate=0r/s;",
    "",
    "limit_req zone=b2;",
    "refuse",
    /invalid rate "rate=0r\/s"/,
  ],
  ["a rate per hour", "limit_req_zone $uri zone=b2:1m rate=10r/h;", "", "limit_req zone=b2;", "refuse", /invalid rate/],
  [
    "a fractional rate",
    "limit_req_zone $uri zone=b2:1m rate=1.5r/s;",
    "",
    "limit_req zone=b2;",
    "refuse",
    /invalid rate/,
  ],
  ["no rate: NGINX's default 1r/s", "limit_req_zone $uri zone=b2:1m zone=b2:1m;", "", "limit_req zone=b2;", "accept"],
  [
    "two arguments",
    "limit_req_zone $uri zone=b2:1m;",
    "",
    "limit_req zone=b2;",
    "refuse",
    /invalid number of arguments/,
  ],
  [
    "four arguments to the zone",
    "limit_req_zone $uri zone=b2:1m rate=10r/s extra;",
    "",
    "limit_req zone=b2;",
    "refuse",
    /invalid number of arguments/,
  ],
  ["rate before zone", "limit_req_zone $uri rate=10r/s zone=b2:1m;", "", "limit_req zone=b2;", "accept"],
  [
    "a zone without a size",
    "limit_req_zone $uri zone=b2 rate=10r/s;",
    "",
    "limit_req zone=b2;",
    "refuse",
    /invalid zone size "zone=b2"/,
  ],
  [
    "a zone of 1k",
    "limit_req_zone $uri zone=b2:1k rate=10r/s;",
    "",
    "limit_req zone=b2;",
    "refuse",
    /zone "zone=b2:1k" is too small/,
  ],
  ["a zone of 31k", "limit_req_zone $uri zone=b2:31k rate=10r/s;", "", "limit_req zone=b2;", "refuse", /is too small/],
  ["a zone of 32k", "limit_req_zone $uri zone=b2:32k rate=10r/s;", "", "limit_req zone=b2;", "accept"],
  ["a zone of 32768 bytes", "limit_req_zone $uri zone=b2:32768 rate=5r/s;", "", "limit_req zone=b2;", "accept"],
  [
    "a zone of 64K and 1M",
    "limit_req_zone $uri zone=b2:64K rate=10r/s; limit_req_zone $uri zone=b3:1M rate=1r/s;",
    "",
    "limit_req zone=b2; limit_req zone=b3;",
    "accept",
  ],
  [
    "a zone of 1g (no such unit)",
    "limit_req_zone $uri zone=b2:1g rate=5r/s;",
    "",
    "limit_req zone=b2;",
    "refuse",
    /invalid zone size/,
  ],
  [
    "a zone without a name",
    "limit_req_zone $uri zone=:1m rate=10r/s;",
    "",
    "limit_req zone=base;",
    "refuse",
    /must have "zone" parameter/,
  ],
  [
    "a zone defined twice",
    "limit_req_zone $uri zone=base:1m rate=10r/s;",
    "",
    "limit_req zone=base;",
    "refuse",
    /zone "base" is already defined/,
  ],
  [
    "limit_req_zone in a server",
    "",
    "limit_req_zone $uri zone=b3:1m rate=1r/s;",
    "limit_req zone=base;",
    "refuse",
    /"limit_req_zone" directive is not allowed here/,
  ],
  ["an empty key", 'limit_req_zone "" zone=b2:1m rate=10r/s;', "", "limit_req zone=b2;", "accept"],
  ["limit_req_status 429", "limit_req_status 429;", "", "limit_req zone=base;", "accept"],
  [
    "limit_req_status 600",
    "limit_req_status 600;",
    "",
    "limit_req zone=base;",
    "refuse",
    /value must be between 400 and 599/,
  ],
  [
    "limit_req_status 399",
    "limit_req_status 399;",
    "",
    "limit_req zone=base;",
    "refuse",
    /value must be between 400 and 599/,
  ],
  [
    "limit_req_status twice in a block",
    "limit_req_status 429; limit_req_status 503;",
    "",
    "limit_req zone=base;",
    "refuse",
    /"limit_req_status" directive is duplicate/,
  ],
  [
    "limit_req_status with two values",
    "limit_req_status 429 503;",
    "",
    "limit_req zone=base;",
    "refuse",
    /invalid number of arguments/,
  ],
  ["limit_req_dry_run ON", "limit_req_dry_run ON;", "", "limit_req zone=base;", "accept"],
  [
    "limit_req_dry_run maybe",
    "limit_req_dry_run maybe;",
    "",
    "limit_req zone=base;",
    "refuse",
    /it must be "on" or "off"/,
  ],
  [
    "limit_req_dry_run twice in a block",
    "limit_req_dry_run on; limit_req_dry_run off;",
    "",
    "limit_req zone=base;",
    "refuse",
    /is duplicate/,
  ],
  ["limit_req_log_level WARN", "limit_req_log_level WARN;", "", "limit_req zone=base;", "accept"],
  [
    "limit_req_log_level debug",
    "limit_req_log_level debug;",
    "",
    "limit_req zone=base;",
    "refuse",
    /invalid value "debug"/,
  ],
  [
    "one name for both modules' zones",
    "limit_conn_zone $binary_remote_addr zone=base:1m;",
    "",
    "limit_req zone=base;",
    "refuse",
    /already declared for a different use/,
  ],
  ["limit_conn", CONN, "", "limit_conn c 10;", "accept"],
  ["limit_conn 0", CONN, "", "limit_conn c 0;", "refuse", /invalid number of connections "0"/],
  ["limit_conn 65536", CONN, "", "limit_conn c 65536;", "refuse", /connection limit must be less 65536/],
  [
    "limit_conn 20000: NGINX takes it, Sluice's bound is 10000",
    CONN,
    "",
    "limit_conn c 20000;",
    "refuse",
    /NGINX takes it, but a Sluice concurrency rule's limit is at most 10000/,
  ],
  [
    "the same conn zone twice in one block",
    CONN,
    "",
    "limit_conn c 10; limit_conn c 20;",
    "refuse",
    /"limit_conn" directive is duplicate/,
  ],
  [
    "a conn zone of 16k",
    "limit_conn_zone $binary_remote_addr zone=c:16k;",
    "",
    "limit_conn c 10;",
    "refuse",
    /is too small/,
  ],
  [
    "a conn zone with a third argument",
    "limit_conn_zone $binary_remote_addr zone=c:1m extra;",
    "",
    "limit_conn c 10;",
    "refuse",
    /invalid number of arguments/,
  ],
  [
    "limit_conn_zone in a server",
    CONN,
    "limit_conn_zone $uri zone=d:1m;",
    "limit_conn c 10;",
    "refuse",
    /not allowed here/,
  ],
  [
    "limit_conn in if",
    CONN,
    "",
    "if ($arg_x) { limit_conn c 1; }",
    "refuse",
    /"limit_conn" directive is not allowed here/,
  ],
  [
    "limit_conn_status and limit_conn_dry_run On",
    `${CONN} limit_conn_status 429; limit_conn_dry_run On;`,
    "",
    "limit_conn c 10;",
    "accept",
  ],
  [
    "limit_conn_status 700",
    `${CONN} limit_conn_status 700;`,
    "",
    "limit_conn c 10;",
    "refuse",
    /value must be between 400 and 599/,
  ],
];

/** The rows with NGINX's verdict second, for the test's name. */
const CASES = ROWS.map(
  ([name, http, server, location, verdict, message]) => [name, verdict, http, server, location, message] as const,
);

function written(text: string): { dir: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-valid-"));
  writeFileSync(join(dir, "nginx.conf"), text);
  return { dir, path: join(dir, "nginx.conf") };
}

describe("sluice import nginx refuses exactly what NGINX refuses", () => {
  it.each(CASES)("%s (NGINX: %s)", (_name, verdict, http, server, location, message) => {
    const { path } = written(config(http, server, location));
    const run = () => importNginx(readNginxConfig(path));
    if (verdict === "accept") {
      expect(() => run()).not.toThrow();
      return;
    }
    expect(() => run()).toThrow(NginxImportError);
    expect(() => run()).toThrow(message ?? NGINX_REFUSES);
    // A refusal NGINX shares says so; the two of Sluice's own bounds say that NGINX takes the value.
    const own = /Sluice/.test(String(message));
    expect(() => run()).toThrow(own ? /Sluice/ : NGINX_REFUSES);
    expect(() => run()).toThrow(/nginx\.conf:\d+: /);
  });
});

describe("the pinned verdicts are the real NGINX's", () => {
  const nginx = nginxBinary();
  it.each(CASES)("%s: nginx -t says %s", (_name, verdict, http, server, location, message) => {
    const { dir, path } = written(config(http, server, location));
    const r = spawnSync(
      nginx,
      ["-t", "-q", "-p", dir, "-c", path, "-g", `pid ${dir}/nginx.pid; error_log ${dir}/error.log;`],
      {
        encoding: "utf8",
      },
    );
    const ownBound = /Sluice/.test(String(message));
    expect(r.status === 0 ? "accept" : "refuse", r.stderr).toBe(ownBound ? "accept" : verdict);
  });
});

/**
 * NGINX's spaces are ASCII space, tab, CR and LF (ngx_conf_read_token): a no-break space or a byte-order mark is part
 * of a word. The tokenizer once took them for spaces and never moved past them: a README, or any file saved with a
 * byte-order mark, ran the importer out of memory. Each file is checked with the real `nginx -t` too.
 */
describe("bytes NGINX reads as part of a word", () => {
  const FILES: [string, string, RegExp][] = [
    [
      "a byte-order mark",
      "\ufeffevents {}\nhttp { server { listen 127.0.0.1:8080; } }\n",
      /nginx\.conf:1:1: directive "\\ufeffevents" holds U\+FEFF \(a byte-order mark\)/,
    ],
    [
      "a no-break space before a directive",
      "events {}\nhttp {\u00a0server { listen 127.0.0.1:8080; } }\n",
      /nginx\.conf:2:7: directive "\\u00a0server" holds U\+00A0/,
    ],
    [
      "a no-break space between arguments",
      "events {}\nhttp { limit_req_zone $binary_remote_addr\u00a0zone=a:1m rate=1r/s; server { listen 127.0.0.1:8080; limit_req zone=a; } }\n",
      /invalid number of arguments in "limit_req_zone" directive/,
    ],
  ];
  it.each(FILES)("%s: refused, as nginx -t refuses it", (_name, text, message) => {
    const { dir, path } = written(text);
    expect(() => importNginx(readNginxConfig(path))).toThrow(message);
    const r = spawnSync(
      nginxBinary(),
      ["-t", "-q", "-p", dir, "-c", path, "-g", `pid ${dir}/nginx.pid; error_log ${dir}/error.log;`],
      {
        encoding: "utf8",
      },
    );
    expect(r.status, r.stderr).not.toBe(0);
  });

  it("a no-break space inside an argument is part of it, as in NGINX", () => {
    const { dir, path } = written(config("", "", 'limit_req zone=base;\n            add_header X-Note "a\u00a0b";'));
    expect(() => importNginx(readNginxConfig(path))).not.toThrow();
    const r = spawnSync(
      nginxBinary(),
      ["-t", "-q", "-p", dir, "-c", path, "-g", `pid ${dir}/nginx.pid; error_log ${dir}/error.log;`],
      {
        encoding: "utf8",
      },
    );
    expect(r.status, r.stderr).toBe(0);
  });
});

describe("limit_req_status 444, NGINX's close-the-connection", () => {
  it("is imported as status 444 with what differs said", () => {
    const { path } = written(config("limit_req_status 444;", "", "limit_req zone=base;"));
    const r = importNginx(readNginxConfig(path));
    expect(r.rules.every((rule) => rule.fields.some(([k, v]) => k === "status" && v === 444))).toBe(true);
    expect(r.report.map((i) => `${i.kind}: ${i.message}`)).toContainEqual(
      expect.stringMatching(/^approximate: .*status 444: NGINX closes the connection without a response/),
    );
  });
});

describe("NGINX Plus's sync on a zone", () => {
  it("is taken with a note (NGINX Plus takes it; the open-source nginx -t here does not, which is checked too)", () => {
    const { dir, path } = written(
      config(
        "limit_req_zone $uri zone=b2:1m rate=10r/s sync; limit_conn_zone $binary_remote_addr zone=c:1m sync;",
        "",
        "limit_req zone=b2; limit_conn c 5;",
      ),
    );
    const r = importNginx(readNginxConfig(path));
    expect(r.rules.length).toBeGreaterThan(0);
    expect(r.report.filter((i) => i.message.includes("sync (NGINX Plus's zone shared across a cluster"))).toHaveLength(
      2,
    );
    const t = spawnSync(
      nginxBinary(),
      ["-t", "-q", "-p", dir, "-c", path, "-g", `pid ${dir}/nginx.pid; error_log ${dir}/error.log;`],
      {
        encoding: "utf8",
      },
    );
    expect(t.status).not.toBe(0);
    expect(t.stderr).toMatch(/invalid number of arguments in "limit_req_zone"/);
  });
});
