/**
 * `npm start` (scripts/start.mjs) reloads rules/ as a server should: a rule file made invalid leaves the last valid
 * rules in service (requests are answered at once, from them) and prints the validator's messages in a few lines,
 * without a stack trace; fixed, the new rules are served; a second `npm start` on a taken port says so in one line.
 * Run in a copy of the project, with the shipped example rules.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  fetchWithin,
  freePort,
  OFFLINE_ENV,
  projectCopy,
  shippedRules,
  stopWrangler,
  type WranglerDev,
} from "../support/wrangler_dev.ts";

const dir = projectCopy("sluice-e2e-live-", shippedRules());
const file = join(dir, "rules", "shiplane.yaml");
const valid = readFileSync(file, "utf8");
let port = 0;
let server: WranglerDev | null = null;

/** `npm start` in the copy, as a process group of its own (its output collected). */
function start(env: Record<string, string>): { child: ChildProcess; output: string[] } {
  const output: string[] = [];
  const child = spawn(process.execPath, ["scripts/start.mjs", "--persist-to", join(dir, ".state")], {
    cwd: dir,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...OFFLINE_ENV, ...env },
  });
  child.stdout?.on("data", (d: Buffer) => output.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => output.push(d.toString()));
  return { child, output };
}

beforeAll(async () => {
  port = await freePort();
  const { child, output } = start({ PORT: String(port) });
  server = { child, output, base: `http://127.0.0.1:${port}` };
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`npm start exited:\n${output.join("")}`);
    if (Date.now() > deadline) throw new Error(`npm start did not answer within 90 s:\n${output.join("")}`);
    try {
      await fetchWithin(`${server.base}/health-probe`, 1000);
      break;
    } catch {
      await sleep(200); // not listening yet
    }
  }
}, 120_000);

afterAll(async () => {
  if (server !== null) await stopWrangler(server);
  rmSync(dir, { recursive: true, force: true });
});

/** The free-global item of RateLimit-Policy, answered within `withinMs`. */
async function policy(withinMs: number): Promise<string> {
  const r = await fetchWithin(`${server!.base}/v1/quotes`, withinMs, {
    headers: { "X-API-Key": "sk_free_demo", "CF-Connecting-IP": "203.0.113.9" },
  });
  expect(r.status).toBe(200);
  return /"free-global";q=\d+;w=\d+/.exec(r.headers.get("RateLimit-Policy") ?? "")?.[0] ?? "";
}

const printed = () => server!.output.join("");

describe("npm start: live reload of rules/", () => {
  it("compiles the rules once at start-up", () => {
    expect(printed().match(/wrote src\/generated\/rules\.ts/g)).toHaveLength(1);
    expect(existsInOutput("[custom build]")).toBe(false);
  });

  it("an invalid file: the last valid rules answer at once, the messages are printed in a few lines", async () => {
    expect(await policy(10_000)).toBe('"free-global";q=20;w=2');
    const before = printed().length;
    writeFileSync(file, valid.replace("  burst: 20\n", "  brust: 20\n"));
    await expect.poll(() => printed().slice(before), { timeout: 10_000 }).toContain("free-global.brust");
    expect(await policy(1_000)).toBe('"free-global";q=20;w=2'); // no request waits for the rules to be fixed
    const report = printed().slice(before);
    expect(report).toContain('rules/shiplane.yaml: free-global.brust: unknown key; did you mean "burst"?');
    expect(report).toContain("still serving the last valid ones");
    expect(report).not.toMatch(/\n\s+at /); // no stack trace
    expect(report.trim().split("\n").length).toBeLessThanOrEqual(6);
  });

  it("a YAML syntax error names line and column, and the last valid rules still answer", async () => {
    const before = printed().length;
    writeFileSync(file, valid.replace("  burst: 20\n", "\tburst: 20\n"));
    await expect.poll(() => printed().slice(before), { timeout: 10_000 }).toMatch(/rules\/shiplane\.yaml:\d+:1: a tab/);
    expect(await policy(1_000)).toBe('"free-global";q=20;w=2');
  });

  it("fixed, the new rules are served", async () => {
    writeFileSync(file, valid.replace("  burst: 20\n", "  burst: 7\n"));
    await expect.poll(() => policy(5_000), { timeout: 30_000, interval: 250 }).toBe('"free-global";q=7;w=1');
  });

  // A deny rule goes from the rule file through `sluice compile` (DENY_RULES) to the running Worker (deployed.ts).
  it("a deny rule added: its address refused with 403 and a problem naming it, others served", async () => {
    const deny = "\n- id: blocked\n  deny: true\n  match: { address: 198.51.100.66 }\n";
    writeFileSync(file, valid.replace("  burst: 20\n", "  burst: 7\n") + deny);
    const from = (address: string) =>
      fetchWithin(`${server!.base}/v1/quotes`, 5_000, {
        headers: { "X-API-Key": "sk_free_demo", "CF-Connecting-IP": address },
      });
    await expect.poll(async () => (await from("198.51.100.66")).status, { timeout: 30_000, interval: 250 }).toBe(403);
    const refused = await from("198.51.100.66");
    expect(JSON.parse(refused.text)).toMatchObject({ status: 403, rule: "blocked" });
    expect(refused.headers.get("retry-after")).toBeNull();
    expect((await from("198.51.100.67")).status).toBe(200);
  });

  it("a second npm start on the same port says so in one line", () => {
    const second = spawnSync(process.execPath, ["scripts/start.mjs"], {
      cwd: dir,
      encoding: "utf8",
      env: { ...process.env, ...OFFLINE_ENV, PORT: String(port) },
    });
    expect(second.status).toBe(1);
    expect(second.stdout).toBe("");
    expect(second.stderr).toBe(
      `sluice: port ${port} on 127.0.0.1 is taken (is another \`npm start\` running?); stop it, or run PORT=${port + 1} npm start\n`,
    );
  });
});

function existsInOutput(text: string): boolean {
  return printed().includes(text);
}
