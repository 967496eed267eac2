/**
 * A binding whose `props.rule` (in the caller's wrangler.toml) names no rule: every call rejects with a message that
 * says to fix it there, and Sluice logs it once per isolate as `binding_misconfigured` (not a line per call).
 */
import { createExecutionContext, env } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { limitKey } from "../../src/edge/binding.ts";
import { createIsolate } from "../../src/isolate/isolate.ts";
import { rulesFrom } from "./helpers.ts";

const rules = rulesFrom(`
- id: login-per-ip
  match: { identity: ip }
  algorithm: fixed_window
  limit: 5
  window: min
`);

afterEach(() => vi.restoreAllMocks());

describe("a mistyped props.rule", () => {
  it("rejects every call and is logged once per isolate", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const bx = { env, ctx: createExecutionContext(), rules, isolate: createIsolate() };
    const errors: Error[] = [];
    for (let i = 0; i < 3; i++) {
      await limitKey({ key: "198.51.100.9" }, { rule: "login-per-iq" }, bx).catch((e: Error) => errors.push(e));
    }
    expect(errors.map((e) => e.message)).toEqual(
      Array(3).fill('Sluice limit(): unknown rule "login-per-iq" (the binding\'s props.rule, in your wrangler.toml)'),
    );
    expect(errors.every((e) => e instanceof RangeError)).toBe(true);
    const lines = logged.mock.calls.map((c) => JSON.parse(String(c[0])) as Record<string, unknown>);
    expect(lines).toEqual([{ event: "binding_misconfigured", error: errors[0]!.message }]);
    // A rule named in the call (not props) is the caller's per-call argument: not logged as a binding problem.
    await limitKey({ key: "k", rule: "nope" }, {}, bx).catch(() => undefined);
    expect(logged).toHaveBeenCalledTimes(1);
  });

  it("a props.rule that is not a string says so, in the same way", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const bx = { env, ctx: createExecutionContext(), rules, isolate: createIsolate() };
    const error = await limitKey({ key: "k" }, { rule: 42 }, bx).catch((e: Error) => e);
    expect((error as Error).message).toBe("Sluice limit(): the binding's props.rule must be a rule id, got number 42");
  });
});
