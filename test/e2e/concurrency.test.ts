/**
 * A concurrency rule through a real `wrangler dev` in front of a real slow origin (a node:http server whose answers
 * the test holds and lets go): under 64-way parallel load the origin never sees more than the rule's limit in flight,
 * the slots come back as responses end, and a client that goes away (before or after the origin answered) gives its
 * slot back. Counts, not timings: a slow machine may only admit fewer.
 */
import { rmSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dropBuildStep, projectCopy, startWrangler, stopWrangler, type WranglerDev } from "../support/wrangler_dev.ts";

const LIMIT = 3;
const RULES = `- id: exports
  match: { route: "* /slow/**", identity: ip }
  algorithm: concurrency
  limit: ${LIMIT}
  slot_ttl: 10min
  on_error: closed
`;

/** The origin: each request waits until the test lets it go (or answers after `autoMs`); it counts what is in flight. */
function slowOrigin() {
  let inFlight = 0;
  let maxInFlight = 0;
  let seen = 0;
  let autoMs: number | null = null;
  const held: ServerResponse[] = [];
  const answer = (res: ServerResponse) => {
    if (!res.headersSent) res.writeHead(200, { "Content-Type": "text/plain" });
    res.end("done\n", () => inFlight--);
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    // Only /slow/ is slow (wrangler_dev.ts asks for / until the Worker answers).
    if (!req.url?.startsWith("/slow/")) {
      res.end("ok\n");
      return;
    }
    seen++;
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    // /slow/quiet answers nothing until it is let go; the rest send their header and a first line at once.
    if (req.url !== "/slow/quiet") {
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.write("working\n");
    }
    if (autoMs === null) held.push(res);
    else setTimeout(() => answer(res), autoMs);
  });
  return {
    server,
    stats: () => ({ inFlight, maxInFlight, seen, held: held.length }),
    auto: (ms: number | null) => {
      autoMs = ms;
    },
    letGo: () => {
      for (const res of held.splice(0)) answer(res);
    },
  };
}

let dir = "";
let sluice: WranglerDev | null = null;
const origin = slowOrigin();

beforeAll(async () => {
  await new Promise<void>((resolve) => origin.server.listen(0, "127.0.0.1", resolve));
  const port = (origin.server.address() as AddressInfo).port;
  dir = projectCopy("sluice-e2e-conc-", { "conc.yaml": RULES });
  dropBuildStep(dir);
  sluice = await startWrangler(
    join(dir, ".state"),
    { ECHO_ORIGIN: "false", UPSTREAM_URL: `http://127.0.0.1:${port}`, LIMITER_TIMEOUT_MS: "10000" },
    dir,
  );
});

afterAll(async () => {
  if (sluice !== null) await stopWrangler(sluice);
  origin.letGo();
  await new Promise<void>((resolve) => origin.server.close(() => resolve()));
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

const send = (ip: string, signal?: AbortSignal, path = "/slow/export") =>
  fetch(`${sluice!.base}${path}`, { method: "POST", headers: { "CF-Connecting-IP": ip }, signal });

/** Send until one is admitted (the slot freed in the background), at most `tries` times; the admitted response. */
async function admittedWithin(ip: string, tries: number): Promise<Response | null> {
  for (let i = 0; i < tries; i++) {
    const r = await send(ip);
    if (r.status === 200) return r;
    await r.text();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return null;
}

describe("concurrency in wrangler dev, in front of a slow origin", () => {
  it("64 at once: the limit reach the origin, the rest are refused; read to the end, the slots come back", async () => {
    const ip = "198.51.100.7";
    const answers = await Promise.all(Array.from({ length: 64 }, () => send(ip)));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(LIMIT);
    expect(statuses.filter((s) => s === 429)).toHaveLength(64 - LIMIT);
    expect(origin.stats()).toMatchObject({ seen: LIMIT, held: LIMIT, maxInFlight: LIMIT });
    origin.letGo();
    for (const r of answers) await r.text();
    const next = await admittedWithin(ip, 100);
    expect(next?.status).toBe(200);
    origin.letGo();
    await next?.text();
  });

  it("64 clients in a loop against a slow origin: never more than the limit in flight at the origin", async () => {
    const ip = "198.51.100.8";
    origin.auto(20);
    const before = origin.stats().seen;
    let admitted = 0;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        for (let i = 0; i < 4; i++) {
          const r = await send(ip);
          if (r.status === 200) admitted++;
          await r.text();
        }
      }),
    );
    origin.auto(null);
    expect(origin.stats().maxInFlight).toBe(LIMIT);
    expect(origin.stats().seen - before).toBe(admitted);
    // slots came back as responses ended: far more than the limit got through over the run
    expect(admitted).toBeGreaterThan(LIMIT);
  });

  // What this case can see: under wrangler dev a client's going away never reaches the Worker (its proxy reads the
  // response on to the end once the origin answers). Mutation audit: releasing only on a cancelled body left both
  // aborted slots held; never releasing on one still passed. So it checks that an abandoned request's slot is not
  // lost (it comes back once the origin's answer has been read), not the cancellation path, which the Workers-runtime
  // test checks (test/integration/concurrency.test.ts, "gives the slot back when the client goes away").
  it("a client that goes away gives its slot back, after the origin answered and before", async () => {
    const ip = "198.51.100.9";
    // After: the origin answered (headers and a first chunk), the body is still streaming when the client aborts.
    const after = new AbortController();
    const r = await send(ip, after.signal);
    expect(r.status).toBe(200);
    // Before: the client aborts while the origin has not answered at all.
    const before = new AbortController();
    const pending = send(ip, before.signal, "/slow/quiet").then(
      () => "answered",
      () => "aborted",
    );
    // The third slot is held by a request the test reads to the end later (sent once the quiet one reached the origin).
    while (origin.stats().held < 2) await new Promise((resolve) => setTimeout(resolve, 50));
    const third = await admittedWithin(ip, 1);
    after.abort();
    before.abort();
    expect(await pending).toBe("aborted");
    origin.letGo();
    // Both aborted requests' slots come back (the third is still held): two more are admitted.
    const one = await admittedWithin(ip, 100);
    const two = await admittedWithin(ip, 100);
    expect([one?.status, two?.status]).toEqual([200, 200]);
    origin.letGo();
    for (const x of [third, one, two]) await x?.text();
  });
});
