/**
 * `match.address` and `match.except_address` in the Workers runtime: a rule applies only to clients (by
 * `CF-Connecting-IP`) in its ranges, never to those in its excepted ones (an allowlist: NGINX's `geo` + `map` that
 * gives an office an empty key, Cloudflare's `not ip.src in {...}`), through the gateway and the service binding's
 * `check` path (src/edge/judge.ts gives the request's address to src/request/match.ts); and the replay engine
 * decides as the gateway on a generated request stream (a trace line's `address` column).
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { checkRequest } from "../../src/edge/binding.ts";
import { settingsOf } from "../../src/edge/settings.ts";
import { Replayer } from "../../src/replay/engine.ts";
import { compileRules } from "../../src/request/match.ts";
import { gatewayFetch, getLine, isolate, replayedStatus, resolvedFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

let run = 0;
/** Two requests an hour per client but the office's (a /28 and an IPv6 /48); partners' /24 shares 3 an hour. */
function yaml() {
  run++;
  return `
- id: per-client-${run}
  match: { route: "* /v1/**", except_address: ["203.0.113.0/28", "2001:db8:1::/48"], identity: ip }
  algorithm: fixed_window
  limit: 2
  window: h
- id: partners-${run}
  match: { route: "* /v2/**", address: 198.51.100.0/24 }
  key: global
  algorithm: fixed_window
  limit: 3
  window: h
`;
}

const get = (address: string | null, path = "/v1/things") =>
  new Request(`https://api.example.com${path}`, { headers: address === null ? {} : { "CF-Connecting-IP": address } });

describe("match.address and match.except_address through the gateway", () => {
  it.each<[string, string, number]>([
    ["a client outside the office: its third request refused", "192.0.2.9", 429],
    ["the office's last address (.15 of the /28): never counted", "203.0.113.15", 200],
    ["the first address past the office's /28 (.16): counted", "203.0.113.16", 429],
    ["the office as IPv4-mapped IPv6: never counted", "::ffff:203.0.113.3", 200],
    ["an IPv6 client inside the office's /48: never counted", "2001:db8:1:ffff::1", 200],
    ["an IPv6 client just outside it: counted", "2001:db8:2::1", 429],
  ])("%s", async (_name, address, third) => {
    const rules = compileRules(resolvedFrom(yaml()));
    setNow(T0);
    for (let i = 0; i < 2; i++) expect((await gatewayFetch(rules, get(address))).status).toBe(200);
    expect((await gatewayFetch(rules, get(address))).status).toBe(third);
  });

  it("a partner range shares one budget; a client outside it is not the rule's", async () => {
    const rules = compileRules(resolvedFrom(yaml()));
    setNow(T0);
    for (const a of ["198.51.100.1", "198.51.100.200", "198.51.100.7"])
      expect((await gatewayFetch(rules, get(a, "/v2/x"))).status).toBe(200);
    expect((await gatewayFetch(rules, get("198.51.100.9", "/v2/x"))).status).toBe(429);
    expect((await gatewayFetch(rules, get("198.51.101.9", "/v2/x"))).status).toBe(200);
  });
});

describe("the service binding's check decides by the address it is given", () => {
  it.each<[string, number]>([
    ["an office address: never counted", 200],
    ["the next address: counted, its third request refused", 429],
  ])("%s", async (name, third) => {
    const rules = compileRules(resolvedFrom(yaml()));
    const address = name.startsWith("an office") ? "203.0.113.4" : "203.0.113.40";
    setNow(T0);
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const ctx = createExecutionContext();
      const input = { url: "https://api.example.com/v1/things", headers: { "CF-Connecting-IP": address } };
      statuses.push((await checkRequest(input, { env, ctx, rules, isolate })).status);
      await waitOnExecutionContext(ctx);
    }
    expect(statuses).toEqual([200, 200, third]);
  });
});

describe("the replay engine decides as the gateway (a trace line's address)", () => {
  it("on a generated request stream", async () => {
    const shot = fc.record({
      gapMs: fc.integer({ min: 0, max: 120_000 }),
      address: fc.constantFrom(
        "192.0.2.1",
        "203.0.113.1",
        "203.0.113.16",
        "::ffff:203.0.113.2",
        "2001:db8:1::9",
        "2001:db8:2::9",
        "198.51.100.4",
        "198.51.100.77",
      ),
      path: fc.constantFrom("/v1/things", "/v2/things"),
    });
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(fc.array(shot, { minLength: 8, maxLength: 24 }), async (shots) => {
        const resolved = resolvedFrom(yaml());
        const rules = compileRules(resolved);
        const replayer = new Replayer(resolved, { settings: settingsOf(env), accounts: null });
        let tMs = T0;
        for (const s of shots) {
          tMs += s.gapMs;
          setNow(tMs);
          const edge = (await gatewayFetch(rules, get(s.address, s.path))).status;
          const line = getLine(tMs, s.path, s.address);
          const replayed = replayedStatus(replayer, line);
          expect({ tMs: tMs - T0, ...s, replayed }).toEqual({ tMs: tMs - T0, ...s, replayed: edge });
          seen.set(edge, (seen.get(edge) ?? 0) + 1);
        }
      }),
      { numRuns: 6, seed: 33 },
    );
    expect([...seen.keys()].sort()).toEqual([200, 429]);
  });
});
