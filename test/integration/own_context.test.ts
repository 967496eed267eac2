/**
 * Issue 18: a request woken by another request must make its own I/O from its own context. Concurrent requests on one
 * key take turns: the request whose call ends hands the next call to the first one waiting (and answers the others),
 * by settling a promise that request awaits. The runtime may run that request's continuation in the context of the
 * request that settled it, whatever its compatibility flags say: a 5-minute soak under `wrangler dev` saw it after
 * about a minute (3,771 fail-open and fail-closed decisions, each "Cannot perform I/O on behalf of a different
 * request ... (I/O type: SpanParent)" from the object call). The vitest pool runs its Worker with
 * `no_handle_cross_request_promise_resolution`, where it always happens; here the runtime is also made to *say* it
 * resumes every continuation in its own context (`Cloudflare.compatibilityFlags`), as `wrangler dev` and production
 * say. Code that trusted the flag (before the fix: resume.ts took a plain `await` when the flag was on) fails every
 * handed-over call here; code that continues only from its own timer decides every request.
 *
 * Time is frozen, so the reference is the rule's own limit at one instant.
 */
import { SELF } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

const ADMIN = { Authorization: "Bearer test-admin-token-0123456789abcdef" };
const stats = async () =>
  (await SELF.fetch("https://sluice.test/_sluice/stats", { headers: ADMIN })).json<Record<string, number>>();

/** The runtime claims the flag on, as `wrangler dev` and production do; the pool's runtime does not honour it. */
function claimCrossRequestResolution(): void {
  const runtime = (globalThis as { Cloudflare?: { compatibilityFlags?: Record<string, boolean> } }).Cloudflare;
  const compatibilityFlags = { ...(runtime?.compatibilityFlags ?? {}), handle_cross_request_promise_resolution: true };
  vi.stubGlobal("Cloudflare", { ...runtime, compatibilityFlags });
}

describe("a request handed the next call by another request makes it from its own context", () => {
  it("48 concurrent logins from one address, turns handed from request to request: every rule decided, none failed", async () => {
    claimCrossRequestResolution();
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    vi.spyOn(console, "log").mockImplementation(() => {});
    setNow(T0);
    const ip = "203.0.113.218";
    const before = await stats();
    const statuses = await Promise.all(
      Array.from({ length: 48 }, async () => {
        const response = await SELF.fetch("https://sluice.test/v1/login", {
          method: "POST",
          headers: { "CF-Connecting-IP": ip },
        });
        await response.arrayBuffer();
        return response.status;
      }),
    );
    const after = await stats();
    const failed = errors.mock.calls.map((c) => String(c[0])).filter((line) => line.includes("limiter_failed"));
    expect(failed, failed[0]).toEqual([]);
    expect(after.fail_open! - before.fail_open!).toBe(0);
    // login-per-ip allows 5 at once; every other request is denied by the object, none fails open or closed.
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(43);
    // Calls were handed over: fewer calls than decisions (three rules per request), so some request's call was made
    // by a request another one woke.
    expect(after.batched_requests! - before.batched_requests!).toBeGreaterThan(0);
  });
});
