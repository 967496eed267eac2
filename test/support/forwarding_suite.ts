/**
 * The real-origin suite (issue 35): what a client sends through Sluice against what a real origin receives, and the
 * other way round. `describeForwarding` registers it for one way of putting Sluice in front of the origin (the test
 * files say which); each case names the real behaviour it stands for.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectForwarded, generatedRequests, type Route } from "./forwarding_cases.ts";
import { openWebSocket, send } from "./raw_client.ts";
import type { RecordingOrigin } from "./recording_origin.ts";

export const SUITE_ADMIN_TOKEN = "e2e-real-origin-admin-token-0123456789";

/**
 * The rules the suite runs under: every request counted (nothing refused), and WebSocket upgrades two per address an
 * hour, to show an upgrade is charged once per connection, not per message.
 */
export const SUITE_RULES = {
  "suite.yaml": `
- id: everyone
  match: { identity: ip }
  algorithm: token_bucket
  rate_per_s: 1000
  burst: 100000
- id: websocket-connections
  match: { route: "GET /ws/**", identity: ip }
  algorithm: fixed_window
  limit: 2
  window_s: 3600
`,
};

export interface Front {
  /** Where the client sends its requests. */
  readonly base: string;
  readonly origin: RecordingOrigin;
  stop(): Promise<void>;
}

export interface SuiteOptions {
  readonly route: Route;
  /** The seed of the generated requests (one per way in, so the ways together try more shapes). */
  readonly seed: number;
  /** Whether WebSocket upgrades go through this way in (the caller's own fetch is its own business). */
  readonly webSocket: boolean;
  /** Whether this way in also carries the one large upload (100 MiB, the size the issue names: seconds, so once per suite run). */
  readonly largeUpload: boolean;
}

/** How many generated requests each way in sends: enough shapes, a few seconds. */
const GENERATED = 40;

export function describeForwarding(name: string, start: () => Promise<Front>, options: SuiteOptions): void {
  describe(name, () => {
    let front: Front;
    beforeAll(async () => {
      front = await start();
    });
    afterAll(async () => {
      await front?.stop();
    });
    const at = (id: string) => front.origin.received.find((r) => r.headers["x-test-id"] === id);
    const ip = (n: number): [string, string] => ["CF-Connecting-IP", `198.51.100.${n}`];

    it("generated requests arrive as sent: method, target bytes, end-to-end fields, body (a client of any API)", async () => {
      const requests = generatedRequests(options.seed, GENERATED, options.route, SUITE_ADMIN_TOKEN, (i) => {
        return `203.0.113.${(i % 200) + 1}`;
      });
      // Eight at a time: independent requests, each found at the origin by its id.
      for (let i = 0; i < requests.length; i += 8) {
        await Promise.all(
          requests.slice(i, i + 8).map(async (sent) => {
            const r = await send(front.base, sent);
            expect(r.status, `${sent.method} ${sent.target}: ${r.body.toString().slice(0, 300)}`).toBe(200);
            expectForwarded(sent, at(sent.id), options.route, SUITE_ADMIN_TOKEN);
          }),
        );
      }
    });

    it("a chunked upload is forwarded as it comes: the origin holds its first bytes before the client sends the last (a streaming upload)", async () => {
      const id = `stream-${options.seed}`;
      const first = Buffer.from("first chunk;");
      const origin = front.origin;
      async function* chunks() {
        yield first;
        // Wait until the origin has read the first chunk: a proxy that buffered the body would stall here.
        while ((origin.inFlight.get(id) ?? 0) < first.length) await new Promise((r) => setTimeout(r, 10));
        yield Buffer.from("last chunk");
      }
      const r = await send(front.base, {
        method: "PUT",
        target: "/upload",
        headers: [ip(1), ["X-Test-Id", id]],
        body: chunks(),
      });
      expect(r.status).toBe(200);
      expect(at(id)?.body?.toString()).toBe("first chunk;last chunk");
    });

    // Issue 35's first finding: with ADMIN_TOKEN set, every request with a body was charged and then answered 502
    // ("This ReadableStream is disturbed"). What an API client does all day: create, replace, patch with a JSON body,
    // and delete with an empty one.
    if (options.route === "sluice")
      it.each([
        ["POST", '{"name":"a"}'],
        ["PUT", '{"name":"b"}'],
        ["PATCH", '{"name":"c"}'],
        ["DELETE", ""],
      ])("%s with a JSON body (%j) arrives whole while ADMIN_TOKEN is set", async (method, text) => {
        const id = `body-${method}-${options.seed}`;
        const r = await send(front.base, {
          method,
          target: `/v1/things/${id}?x=1`,
          headers: [ip(7), ["Content-Type", "application/json"], ["X-Test-Id", id]],
          body: Buffer.from(text),
        });
        expect(r.status, r.body.toString()).toBe(200);
        expect([at(id)?.method, at(id)?.target, at(id)?.body?.toString()]).toEqual([
          method,
          `/v1/things/${id}?x=1`,
          text,
        ]);
      });

    if (options.route === "sluice")
      it("the admin token itself is stripped while the body still arrives", async () => {
        const id = `token-body-${options.seed}`;
        const r = await send(front.base, {
          method: "POST",
          target: "/v1/things",
          headers: [ip(8), ["X-Test-Id", id], ["X-Leak", `Bearer ${SUITE_ADMIN_TOKEN}`]],
          body: Buffer.from("payload"),
        });
        expect(r.status, r.body.toString()).toBe(200);
        expect(at(id)?.body?.toString()).toBe("payload");
        expect(at(id)?.headers["x-leak"]).toBeUndefined();
      });

    if (options.largeUpload)
      it("a 100 MiB upload arrives whole, byte for byte (a file upload)", async () => {
        const id = `large-${options.seed}`;
        const block = Buffer.alloc(1 << 20, 7);
        const hash = createHash("sha256");
        async function* blocks() {
          for (let i = 0; i < 100; i++) {
            block[0] = i;
            hash.update(block);
            yield Buffer.from(block);
          }
        }
        const r = await send(front.base, {
          method: "POST",
          target: "/files",
          headers: [ip(2), ["X-Test-Id", id]],
          body: blocks(),
        });
        expect(r.status).toBe(200);
        expect(at(id)?.bodyBytes).toBe(100 << 20);
        expect(at(id)?.bodySha256).toBe(hash.digest("hex"));
      });

    it("several Set-Cookie lines come back as separate lines (a login setting session and CSRF cookies)", async () => {
      const r = await send(front.base, {
        method: "GET",
        target: "/c",
        headers: [ip(3), ["X-Test-Respond", "cookies"]],
      });
      expect(r.status).toBe(200);
      expect(r.setCookies).toEqual(["a=1; Path=/", "b=2; Path=/; HttpOnly", "c=3, with comma; Path=/"]);
    });

    it("a redirect is passed back, not followed (an OAuth or moved-resource answer)", async () => {
      const r = await send(front.base, {
        method: "GET",
        target: "/r",
        headers: [ip(4), ["X-Test-Respond", "redirect"]],
      });
      expect([r.status, r.headers.location, r.body.toString()]).toEqual([302, "/elsewhere", "moved"]);
      expect(front.origin.received.some((x) => x.target === "/elsewhere")).toBe(false);
    });

    it("304 and HEAD come back without a body (a conditional GET of a cached resource, a HEAD probe)", async () => {
      const cached = await send(front.base, {
        method: "GET",
        target: "/n",
        headers: [ip(5), ["X-Test-Respond", "not-modified"], ["If-None-Match", '"v1"']],
      });
      expect([cached.status, cached.headers.etag, cached.body.length]).toEqual([304, '"v1"', 0]);
      const head = await send(front.base, { method: "HEAD", target: "/h", headers: [ip(5)] });
      expect([head.status, head.headers["x-origin"], head.body.length]).toEqual([200, "recording", 0]);
    });

    it("server-sent events arrive one by one while the origin is still writing (an SSE feed)", async () => {
      const events = await readEvents(front.base, [ip(6), ["X-Test-Respond", "sse:4"]], () => front.origin.ack());
      expect(events).toEqual([0, 1, 2, 3].map((i) => `id: ${i}\ndata: event ${i}\n\n`));
    });

    if (options.webSocket)
      it("a WebSocket upgrade is passed through and charged once per connection, not per message (a chat socket)", async () => {
        const headers = [ip(9)];
        for (let connection = 0; connection < 2; connection++) {
          const ws = await openWebSocket(front.base, "/ws/chat", headers);
          expect(ws.status, "body" in ws ? ws.body : "").toBe(101);
          if (!("roundTrip" in ws)) return;
          for (let m = 0; m < 5; m++) expect(await ws.roundTrip(`message ${m}`)).toBe(`message ${m}`);
          ws.close();
        }
        // Two connections and ten messages spent the rule's two connections: the third is refused before the origin.
        const third = await openWebSocket(front.base, "/ws/chat", headers);
        expect(third.status).toBe(429);
        expect(front.origin.upgrades).toHaveLength(2);
      });
  });
}

/** Read an event stream, acknowledging each complete event so the origin writes the next. */
async function readEvents(base: string, headers: [string, string][], ack: () => void): Promise<string[]> {
  const response = await fetch(`${base}/events`, { headers: Object.fromEntries(headers) });
  expect(response.headers.get("content-type")).toBe("text/event-stream");
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const events: string[] = [];
  let pending = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    pending += decoder.decode(value, { stream: true });
    let end = pending.indexOf("\n\n");
    while (end >= 0) {
      events.push(pending.slice(0, end + 2));
      pending = pending.slice(end + 2);
      ack();
      end = pending.indexOf("\n\n");
    }
  }
  return events;
}
