/**
 * Property-generated requests for the real-origin suite (test/e2e/real_origin*.test.ts), and what an origin behind
 * Sluice must have received for each (docs/production.md, "What the origin receives"). A fixed seed and count: the
 * same requests every run.
 */
import { createHash } from "node:crypto";
import fc from "fast-check";
import { expect } from "vitest";
import type { RawRequest } from "./raw_client.ts";
import type { Received } from "./recording_origin.ts";

/** How a client's request reaches the origin: Sluice forwards it, or the binding's caller does with its own fetch. */
export type Route = "sluice" | "caller";

export interface GeneratedRequest extends RawRequest {
  /** Sent as `X-Test-Id`, to find the request at the origin. */
  readonly id: string;
  readonly bodyBytes: Buffer;
}

/** Fields Sluice removes (forwarding.ts) and the runtime's fetch sets itself: never compared by value. */
const NOT_COMPARED = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "accept-encoding",
  "connection",
  "cf-connecting-ip",
  "cf-worker",
]);
const HOP_BY_HOP = new Set(["keep-alive", "te", "proxy-connection", "expect"]);

const segment = fc.oneof(
  { weight: 6, arbitrary: fc.stringMatching(/^[A-Za-z0-9_~-]{1,8}$/) },
  { weight: 2, arbitrary: fc.stringMatching(/^[a-z0-9]{1,5}\.[a-z0-9]{1,4}$/) },
  { weight: 1, arbitrary: fc.constantFrom("%20", "%C3%A9", "a%3Ab", "%25x", "%2Bplus", "%40at") },
);
const queryPart = fc.stringMatching(/^[A-Za-z0-9_.~+-]{1,6}=[A-Za-z0-9_.~+-]{0,8}(%2B|%26|%3D)?$/);
const headerValue = fc.stringMatching(/^[!-~]([ -~]{0,30}[!-~])?$/);
const endToEnd = fc.constantFrom(
  "X-Gen-A",
  "X-Gen-B",
  "x-gen-c",
  "Accept",
  "Accept-Language",
  "User-Agent",
  "Cache-Control",
  "If-None-Match",
  "X-Forwarded-For",
  "X-Request-Id",
  "Cookie",
  "Content-Type",
);
const hopByHop: fc.Arbitrary<[string, string]> = fc.constantFrom(
  ["Keep-Alive", "timeout=5"],
  ["TE", "trailers"],
  ["Proxy-Connection", "keep-alive"],
);

/** `count` requests from `seed`; through `caller`, no hop-by-hop fields and no admin token (the caller's fetch). */
export function generatedRequests(
  seed: number,
  count: number,
  route: Route,
  adminToken: string,
  address: (i: number) => string,
): GeneratedRequest[] {
  const arbitrary = fc.record({
    method: fc.constantFrom("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"),
    segments: fc.array(segment, { minLength: 1, maxLength: 4 }),
    trailingSlash: fc.boolean(),
    query: fc.option(fc.array(queryPart, { minLength: 1, maxLength: 3 }), { nil: undefined }),
    headers: fc.uniqueArray(fc.tuple(endToEnd, headerValue), { maxLength: 5, selector: ([n]) => n.toLowerCase() }),
    repeated: fc.option(fc.tuple(headerValue, headerValue), { nil: undefined }),
    hop: fc.uniqueArray(hopByHop, { maxLength: 2, selector: ([n]) => n }),
    token: fc.boolean(),
    body: fc.uint8Array({ maxLength: 3000 }),
    framing: fc.constantFrom("none", "length", "chunked", "expect"),
    pieces: fc.integer({ min: 1, max: 4 }),
  });
  return fc.sample(arbitrary, { seed, numRuns: count }).map((g, i) => {
    const id = `gen-${seed}-${i}`;
    const target = `/gen/${g.segments.join("/")}${g.trailingSlash ? "/" : ""}${g.query === undefined ? "" : `?${g.query.join("&")}`}`;
    const headers: [string, string][] = [["CF-Connecting-IP", address(i)], ["X-Test-Id", id], ...g.headers];
    if (g.repeated !== undefined) headers.push(["X-Gen-Repeated", g.repeated[0]], ["X-Gen-Repeated", g.repeated[1]]);
    if (route === "sluice") {
      headers.push(...g.hop);
      if (g.token) headers.push(["X-Gen-Carries-Token", `Bearer ${adminToken}`]);
    }
    const bodyless = g.method === "GET" || g.method === "HEAD" || g.framing === "none";
    const body = Buffer.from(g.body);
    if (bodyless) return { id, method: g.method, target, headers, bodyBytes: Buffer.alloc(0) };
    const size = Math.ceil(body.length / g.pieces);
    const chunks = Array.from({ length: g.pieces }, (_, k) => body.subarray(k * size, (k + 1) * size));
    // Expect through the caller's own fetch is the caller's to handle (docs/production.md): not generated there.
    const expectContinue = g.framing === "expect" && route === "sluice" ? ("send" as const) : undefined;
    return {
      id,
      method: g.method,
      target,
      headers,
      bodyBytes: body,
      body: g.framing === "chunked" ? chunks : body,
      ...(expectContinue === undefined ? {} : { expectContinue }),
    };
  });
}

/** The field values a request carries, by lower-case name, repeated lines joined by ", " (RFC 9110 5.3). */
function joined(lines: readonly (readonly [string, string])[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, value] of lines) {
    const lower = name.toLowerCase();
    out.set(lower, out.has(lower) ? `${out.get(lower)}, ${value.trim()}` : value.trim());
  }
  return out;
}

/** What the origin must have received for `sent`: `got` is the origin's record of it. */
export function expectForwarded(sent: GeneratedRequest, got: Received | undefined, route: Route, adminToken: string) {
  const where = `${sent.method} ${sent.target} (${sent.id})`;
  expect(got, `${where} never reached the origin`).toBeDefined();
  const r = got!;
  expect(r.method, where).toBe(sent.method);
  expect(r.target, where).toBe(sent.target);
  const arrived = joined(r.rawHeaders);
  for (const [name, value] of joined(sent.headers)) {
    if (NOT_COMPARED.has(name)) continue;
    if (HOP_BY_HOP.has(name) && route === "sluice")
      expect(arrived.has(name), `${where}: ${name} forwarded`).toBe(false);
    else if (value.includes(adminToken)) expect(arrived.has(name), `${where}: ${name} carried the token`).toBe(false);
    else expect(arrived.get(name), `${where}: ${name}`).toBe(value);
  }
  for (const [name, value] of arrived)
    expect(value.includes(adminToken), `${where}: ${name} has the token`).toBe(false);
  expect(r.bodyBytes, `${where}: body length`).toBe(sent.bodyBytes.length);
  expect(r.bodySha256, `${where}: body bytes`).toBe(createHash("sha256").update(sent.bodyBytes).digest("hex"));
}
