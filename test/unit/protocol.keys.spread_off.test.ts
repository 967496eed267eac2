/**
 * The key's spread (src/isolate/key_state.ts) with the spread switched off, as the ablation runs it (BENCHMARKS.md 8a):
 * every isolate moves at the first busy answer, for good; a window rule's spread neither grows by the first shard's
 * share of the isolates still on it nor decays. Switching a mechanism off is for this process: its own file.
 */
import { describe, expect, it } from "vitest";
import type { DelegateRoute } from "../../src/isolate/coalesce_types.ts";
import { KeyState, MAX_SPREAD } from "../../src/isolate/key_state.ts";
import { ablate } from "../../src/protocol/mechanisms.ts";
import type { ObjectTransport } from "../../src/protocol/object_call.ts";
import { SPREAD_HALF_LIFE_MS } from "../../src/protocol/tunables.ts";
import { fixedWindow } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);
const transport: ObjectTransport = {
  call: () => Promise.reject(new Error("unused")),
  refund: () => Promise.resolve(null),
};
const route: DelegateRoute = { transport, name: "k@weur.0" };
const windowKey = () =>
  new KeyState(
    {
      transport,
      name: "w:key",
      rule: { id: "w", params: fixedWindow(1000, 10_000) },
      cost: 1,
      timeoutMs: 250,
      lease: null,
      delegate: route,
    },
    T0,
  );

describe("a window rule's spread with the spread off (the ablation)", () => {
  it("decays and grows with it on; off, the highest heard, for good", () => {
    const H = SPREAD_HALF_LIFE_MS;
    const on = windowKey();
    expect(on.spreadDecays()).toBe(true);
    on.spreadTo(0.6, T0);
    expect(on.spreadAt(T0 + H)).toBeCloseTo(0.3, 12);
    ablate("spread");
    const off = windowKey();
    expect(off.spreadDecays()).toBe(false);
    // A busy answer without a spread (delegate.ts leaves it out when off) counts as 1: every shard alike.
    off.heardBusy(1, T0);
    expect([off.spreadAt(T0), off.spreadAt(T0 + 10 * H)]).toEqual([MAX_SPREAD, MAX_SPREAD]);
    const raised = windowKey();
    raised.spreadTo(0.5, T0);
    raised.heardBusy(0.4, T0 + H);
    expect(raised.spreadAt(T0 + 10 * H)).toBe(0.5);
  });
});
