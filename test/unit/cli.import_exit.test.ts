/** `sluice import` writes nothing when it exits 1, and says so when a file has nothing to import. */
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/io.ts";

const dir = mkdtempSync(join(tmpdir(), "sluice-import-exit-"));
const file = (name: string, text: string) => {
  writeFileSync(join(dir, name), text);
  return join(dir, name);
};
const http = (body: string) => `events {}\nhttp {\n${body}\n}\n`;

describe("sluice import exiting 1", () => {
  // $ssl_client_s_dn: a variable no key part can say (a TLS client certificate), so its zone is left out.
  it("leaves --out unwritten when a limit was left out (without --allow-partial)", async () => {
    const conf = file(
      "partial.conf",
      http(
        "limit_req_zone $binary_remote_addr zone=ip:10m rate=10r/s;\nlimit_req_zone $ssl_client_s_dn zone=t:1m rate=1r/s;\n" +
          "server { location /a/ { limit_req zone=ip; } location /b/ { limit_req zone=t; } }",
      ),
    );
    const out = join(dir, "partial.yaml");
    const r = await runCli(["import", "nginx", conf, "--out", out]);
    expect(r.code).toBe(1);
    expect(existsSync(out)).toBe(false);
    expect(r.stderr).toContain("2 left out; nothing written; rerun with --allow-partial");
  });

  it("says an nginx.conf without limit_req has nothing to import, exit 1, instead of writing []", async () => {
    const conf = file("plain.conf", http("server { listen 8080; location / { root /srv; } }"));
    const out = join(dir, "plain.yaml");
    const r = await runCli(["import", "nginx", conf, "--out", out]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      "sluice import: nginx plain.conf has no rate limits to import (no limit_req or limit_conn); nothing written\n",
    );
    expect(existsSync(out)).toBe(false);
  });
});
