/**
 * `sluice import nginx` on a conf.d/ file whose `limit_req` names a zone nginx.conf defines
 * (src/migrate/nginx_elsewhere.ts): without `--root` the error names the file that defines it; with `--root` the
 * definition (and the maps beside it) is read from there.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/io.ts";

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-elsewhere-"));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

const SERVER = {
  "etc/nginx/nginx.conf": `http {
  map $request_method $write { default ""; ~^(POST|PUT)$ $binary_remote_addr; }
  limit_req_zone $binary_remote_addr zone=api:10m rate=5r/s;
  limit_req_zone $write zone=writes:10m rate=1r/s;
  include conf.d/*.conf;
}
`,
  "etc/nginx/conf.d/api.conf": "server {\n  location /api/ { limit_req zone=api burst=5; limit_req zone=writes; }\n}\n",
};

describe("a zone defined in another file", () => {
  it("without --root: refused, naming the file that defines it and the two ways to import", async () => {
    const dir = tree(SERVER);
    const r = await runCli(["import", "nginx", join(dir, "etc/nginx/conf.d/api.conf")]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `conf.d/api.conf:2: limit_req: zone "api" is defined in another file (${join(dir, "etc/nginx/nginx.conf")}:3): import that file, which includes this one, or give --root`,
    );
  });

  it("with --root: read from there, with the map its key names", async () => {
    const dir = tree(SERVER);
    const r = await runCli(["import", "nginx", join(dir, "etc/nginx/conf.d/api.conf"), "--root", dir]);
    expect(r.stderr).toMatch(/nginx\.conf:3: note: zone api is defined here \(found under --root\)/);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/- id: api-api\n {2}match: \{ route: "\* \/api\/\*\*", identity: ip \}/);
    expect(r.stdout).toMatch(/route: \["POST \/api\/\*\*", "PUT \/api\/\*\*"\]/);
  });

  it.each([
    [
      [],
      /no limit_req_zone defines zone "gone" in the files read, nor beside this file or one folder up: import the file that defines it/,
    ],
    [["--root", "ROOT"], /no limit_req_zone defines zone "gone" in the files read nor under --root /],
  ])("defined nowhere (%j): refused with what was searched", async (extra, message) => {
    const dir = tree({ "conf.d/x.conf": "server { limit_req zone=gone; }\n" });
    const args = extra.map((a) => (a === "ROOT" ? dir : a));
    const r = await runCli(["import", "nginx", join(dir, "conf.d/x.conf"), ...args]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(message);
  });
});
