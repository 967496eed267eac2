/**
 * `sluice plan`'s live-state claims checked against the Worker: for each change of scope, identity, match or
 * algorithm, a key spends its whole capacity under the old rule, the deploy happens (the new rules, and a fresh
 * isolate, as a deploy starts every isolate afresh), and the number of requests the Worker then admits at once is
 * the number `stateFate` says (`atLimitAdmits`), and "starts fresh" is said exactly when the Worker starts it fresh.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate, type Isolate } from "../../src/isolate/isolate.ts";
import { changeOf, pairRules, stateFate } from "../../src/replay/deploy_plan.ts";
import { compileRules } from "../../src/request/match.ts";
import type { ResolvedRule } from "../../src/rules/types.ts";
import { bearer, freshIp, knownKey, req, resolvedFrom, setNow, T0 } from "./helpers.ts";

afterEach(() => {
  vi.useRealTimers();
});

const rule = (match: string, body: string, extra = "") =>
  `- id: live\n  match: ${match}\n${body}${extra === "" ? "" : `  ${extra}\n`}`;
const TB = "  algorithm: token_bucket\n  rate: 1/h\n  burst: 4\n";
const KEY = "{ identity: api_key }";

/** How many of `tries` cost-1 requests at one moment the rules admit, for one caller. */
async function admitted(
  rules: readonly ResolvedRule[],
  isolate: Isolate,
  headers: Record<string, string>,
  tries: number,
) {
  const compiled = compileRules(rules);
  let ok = 0;
  for (let i = 0; i < tries; i++) {
    const ctx = createExecutionContext();
    const r = await handleRequest(req("GET", "/x", headers), env, ctx, compiled, isolate);
    await waitOnExecutionContext(ctx);
    await r.arrayBuffer();
    if (r.status === 200) ok++;
    else expect(r.status).toBe(429);
  }
  return ok;
}

describe("plan's live state, as the Worker does it", () => {
  it.each([
    ["scope global -> local", rule(KEY, TB), rule(KEY, TB, "scope: local"), "starts fresh"],
    ["scope local -> global", rule(KEY, TB, "scope: local"), rule(KEY, TB), "starts fresh"],
    ["identity api_key -> ip", rule(KEY, TB), rule("{ identity: ip }", TB), "starts fresh"],
    ["identity ip -> api_key", rule("{ identity: ip }", TB), rule(KEY, TB), "starts fresh"],
    ["a route added to match", rule(KEY, TB), rule('{ route: "GET /x", identity: api_key }', TB), "carried over"],
    [
      "a plan added to match",
      rule("{ plan: free, identity: api_key }", TB),
      rule("{ plan: [free, growth], identity: api_key }", TB),
      "carried over",
    ],
    ["algorithm token_bucket -> gcra", rule(KEY, TB), rule(KEY, TB.replace("token_bucket", "gcra")), "starts fresh"],
    [
      "algorithm -> fixed_window",
      rule(KEY, TB),
      rule(KEY, "  algorithm: fixed_window\n  limit: 6\n  window: h\n"),
      "starts fresh",
    ],
    ["a larger burst", rule(KEY, TB), rule(KEY, TB.replace("burst: 4", "burst: 9")), "carried over"],
  ])("%s", async (_name, beforeYaml, afterYaml, fate) => {
    const before = resolvedFrom(beforeYaml);
    const after = resolvedFrom(afterYaml);
    const [pair] = pairRules(before, after);
    expect(changeOf(pair!)).toBe("changed");
    const claim = stateFate(pair!);
    expect(claim.text).toContain(fate);

    setNow(T0);
    const headers = { ...bearer(await knownKey("sk_plan")), "CF-Connecting-IP": freshIp() };
    expect(await admitted(before, createIsolate(), headers, 5)).toBe(4);
    // The deploy: the new rules, in an isolate of its own.
    const worker = await admitted(after, createIsolate(), headers, 12);
    expect(worker).toBe(claim.atLimitAdmits);
    const fresh = await admitted(
      after,
      createIsolate(),
      { ...bearer(await knownKey("sk_new")), "CF-Connecting-IP": freshIp() },
      12,
    );
    expect(worker === fresh).toBe(fate === "starts fresh");
  });
});
