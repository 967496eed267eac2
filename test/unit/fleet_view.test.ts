/**
 * The fleet view's failures said plainly: a hung Analytics Engine SQL API ends in a message when the deadline passes
 * (the deadline is a signal the test controls: no real time), and a refused token says which settings to check.
 */
import { describe, expect, it } from "vitest";
import { FLEET_TIMEOUT_MS, FleetError, fleetView } from "../../src/edge/admin/fleet.ts";
import { FLEET_PERIODS } from "../../src/edge/admin/fleet_sql.ts";
import denialsOverTime from "../fixtures/analytics_engine/denials_over_time.json" with { type: "json" };
import ruleTotals from "../fixtures/analytics_engine/rule_totals.json" with { type: "json" };
import topDeniedKeys from "../fixtures/analytics_engine/top_denied_keys.json" with { type: "json" };

const FLEET = { accountId: "0123abcd", dataset: "sluice_decisions", apiToken: "t", apiBase: "https://ae.test" };
const HOUR = FLEET_PERIODS[0]!;

async function failureOf(answer: Promise<unknown>): Promise<FleetError> {
  try {
    await answer;
  } catch (error) {
    if (error instanceof FleetError) return error;
    throw error;
  }
  throw new Error("expected a FleetError");
}

describe("fleetView's failures", () => {
  it("a hung API: a message naming the wait when the deadline passes, not a page that never fills", async () => {
    const deadline = new AbortController();
    let asked = 0;
    const hung = ((_url: string, init: RequestInit) => {
      asked++;
      return new Promise<Response>((_resolve, reject) => {
        init.signal?.addEventListener("abort", () => reject(init.signal?.reason));
      });
    }) as typeof fetch;
    const answer = fleetView(FLEET, HOUR, 0, hung, deadline.signal);
    expect(asked).toBe(3);
    deadline.abort(new DOMException("timed out", "TimeoutError"));
    const error = await failureOf(answer);
    expect(error.message).toBe(`the Analytics Engine SQL API did not answer within ${FLEET_TIMEOUT_MS / 1000} s`);
    expect(error.status).toBeNull();
  });

  it.each([401, 403])("a %i: which token and account to check, beside what the API said", async (status) => {
    const refusing = (async () =>
      new Response('{"errors":[{"code":10000,"message":"Authentication error"}]}', { status })) as typeof fetch;
    const error = await failureOf(fleetView(FLEET, HOUR, 0, refusing, new AbortController().signal));
    expect(error.status).toBe(status);
    expect(error.message).toContain(`answered ${status}: {"errors":[{"code":10000,"message":"Authentication error"}]}`);
    expect(error.message).toContain("check that the secret AE_API_TOKEN is an API token with Account Analytics: Read");
    expect(error.message).toContain("AE_ACCOUNT_ID, now 0123abcd, is the account it was made for");
  });

  it("another failure gets no credentials hint", async () => {
    const failing = (async () => new Response("upstream broke", { status: 500 })) as typeof fetch;
    const error = await failureOf(fleetView(FLEET, HOUR, 0, failing, new AbortController().signal));
    expect(error.message).toBe("the Analytics Engine SQL API answered 500: upstream broke");
  });
});

describe("the recorded Analytics Engine answers (the fleet view's fixture and the README screenshot's data)", () => {
  const totals = new Map(ruleTotals.data.map((r) => [r.rule, r]));
  it("each rule's outcomes add up to its decisions", () => {
    for (const r of ruleTotals.data) {
      const parts = [r.allowed, r.denied, r.shadow_denied, r.fail_open, r.fail_closed].map(Number);
      expect(
        parts.reduce((a, b) => a + b, 0),
        r.rule,
      ).toBe(Number(r.decisions));
    }
  });

  it("a rule's denials over time add up to its total denials, and its most denied keys to no more", () => {
    const overTime = new Map<string, number>();
    for (const p of denialsOverTime.data) overTime.set(p.rule, (overTime.get(p.rule) ?? 0) + Number(p.denials));
    const denied = ruleTotals.data.filter((r) => Number(r.denied) > 0).map((r) => [r.rule, Number(r.denied)]);
    expect([...overTime].sort()).toEqual(denied.sort());
    const topKeys = new Map<string, number>();
    for (const k of topDeniedKeys.data) topKeys.set(k.rule, (topKeys.get(k.rule) ?? 0) + Number(k.denials));
    for (const [rule, sum] of topKeys) expect(sum, rule).toBeLessThanOrEqual(Number(totals.get(rule)?.denied));
  });
});
