/**
 * `npm run test:nginx` (third part): a named location's own limits (`location @f { limit_req zone=slow; }`) against
 * the real NGINX. NGINX counts a request once, in the first place with a `limit_req` whose key it has
 * (`r->main->limit_req_set`), and requests reach a named location only after that place (try_files here), so:
 * 1. Where every place has a limit keyed by the address, `sluice import nginx` says @f's limit never counts and leaves
 *    nothing out: NGINX must admit every request a limit of 1 a minute in @f would refuse, and Sluice's replay of
 *    NGINX's log (`trace from nginx`, `simulate`) must decide each request as NGINX did.
 * 2. Where a place's key can be empty (`$http_x_k`, not sent), the import leaves @f's limit out with its reason, and
 *    NGINX does refuse there by @f's limit: the listed difference is a real one, and part 1 passes for NGINX's reason,
 *    not because @f's limit never works.
 * Needs the `nginx` binary (Debian: apt-get install -y nginx). Exit status 0 when both hold.
 */
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  accessLogLines,
  freePort,
  LOOPBACK,
  nginxOrHowToInstall,
  nginxPreamble,
  replayedLog,
  runMain,
  sluice,
  startNginx,
  statusOf,
  stopNginx,
} from "./nginx-run.ts";

/** The configuration: `/t/` keyed by the address; with `emptyKey`, also `/e/` keyed by a header a client may omit. */
function nginxConf(dir: string, port: number, emptyKey: boolean): string {
  return `${nginxPreamble(dir, '$remote_addr $msec $request_time $status "$request"')}
  limit_req_zone $binary_remote_addr zone=addr:1m rate=100r/s;
  limit_req_zone $binary_remote_addr zone=slow:1m rate=1r/m;
  limit_req_zone $http_x_k zone=hdr:1m rate=100r/s;
  server {
    listen ${LOOPBACK}:${port};
    root ${dir}/www;
    limit_req zone=addr burst=1000 nodelay;
    location = /ready { try_files /ok.txt =404; }
    location /t/ { limit_req zone=addr burst=100 nodelay; try_files /missing.txt @f; }
${emptyKey ? "    location /e/ { limit_req zone=hdr burst=100 nodelay; try_files /missing.txt @f; }\n" : ""}    location @f { limit_req zone=slow; try_files /ok.txt =404; }
  }
}
`;
}

/** One run of NGINX on the configuration: the import's report and rules, and NGINX's answers to `paths` in order. */
async function run(binary: string, emptyKey: boolean, paths: readonly string[]) {
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-named-"));
  let nginx: ChildProcess | null = null;
  try {
    mkdirSync(join(dir, "www"));
    mkdirSync(join(dir, "tmp"));
    writeFileSync(join(dir, "www", "ok.txt"), "ok\n");
    const port = await freePort();
    const conf = join(dir, "nginx.conf");
    writeFileSync(conf, nginxConf(dir, port, emptyKey));
    const rules = join(dir, "rules.yaml");
    const report = sluice(["import", "nginx", conf, "--out", rules, "--allow-partial"]).stderr;
    nginx = await startNginx(binary, dir, conf, port, { path: "/ready", status: 200 });
    const statuses: number[] = [];
    for (const path of paths) statuses.push(await statusOf(port, path));
    await stopNginx(nginx);
    nginx = null;
    const replayed = replayedLog<{ path: string; verdict: string }>(dir, conf, rules);
    const logged = accessLogLines(dir).filter((l) => !l.includes("/ready"));
    return { report, statuses, replayed, logged };
  } finally {
    if (nginx !== null) nginx.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
}

// long: the two parts, top to bottom, each printing what it found
async function main(): Promise<number> {
  const binary = nginxOrHowToInstall();
  if (binary === null) return 1;
  const failures: string[] = [];
  const counted = ["/t/1", "/t/2", "/t/3", "/t/4"];
  const one = await run(binary, false, counted);
  console.log(`named location, every place keyed by the address: NGINX answered ${one.statuses.join(" ")}`);
  if (!/location @f .*limit_req zone=slow never counts/.test(one.report))
    failures.push(`the import did not say @f's limit never counts:\n${one.report}`);
  if (/left out:/.test(one.report)) failures.push(`the import left something out:\n${one.report}`);
  if (one.statuses.some((s) => s !== 200)) failures.push("NGINX refused a request: @f's limit counted after all");
  for (const [i, path] of counted.entries()) {
    const answer = one.replayed.find((a) => a.path === path);
    const admitted = answer !== undefined && answer.verdict !== "denied";
    if (admitted !== (one.statuses[i] === 200))
      failures.push(`${path}: NGINX ${one.statuses[i]}, Sluice ${answer?.verdict ?? "no answer"}`);
  }
  const two = await run(binary, true, ["/e/1", "/e/2", "/e/3"]);
  console.log(`named location, a place whose key can be empty: NGINX answered ${two.statuses.join(" ")}`);
  if (!/left out: location @f .*limit_req zone=slow is not applied there/.test(two.report))
    failures.push(`the import did not list @f's limit as left out:\n${two.report}`);
  if (two.statuses.join(" ") !== "200 503 503")
    failures.push("NGINX did not refuse by @f's limit (1 a minute) requests an empty key left uncounted");
  if (two.logged.length !== 3) failures.push(`NGINX logged ${two.logged.length} requests of 3`);
  for (const f of failures) console.log(`FAIL ${f}`);
  if (failures.length === 0) console.log("the import says of a named location's limits what NGINX does with them");
  return failures.length === 0 ? 0 : 1;
}

runMain(main);
