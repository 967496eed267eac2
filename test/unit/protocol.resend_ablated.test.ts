/**
 * The tier with `resend` switched off, as the ablation bench runs it (bench/ablation.ts; src/protocol/mechanisms.ts):
 * a call unanswered past its budget is never sent again, by an isolate (delegate_call.ts `awaitLate`: its late
 * answer gets one more budget in all) or by a delegate (delegate_run.ts: its call fails after
 * `DELEGATE_KEY_TIMEOUT_MS`). In a file of its own: `ablate` is the process's (vitest runs each file apart).
 */
import { describe, expect, it } from "vitest";
import { awaitLate } from "../../src/isolate/delegate_call.ts";
import { KeyState } from "../../src/isolate/key_state.ts";
import { newStats } from "../../src/isolate/metrics.ts";
import { NEW_DELEGATE } from "../../src/protocol/delegate.ts";
import { DelegateRun } from "../../src/protocol/delegate_run.ts";
import { ablate, uses } from "../../src/protocol/mechanisms.ts";
import type { CallResult } from "../../src/protocol/store.ts";
import { DELEGATE_KEY_TIMEOUT_MS, DELEGATE_RESEND_MS } from "../../src/protocol/tunables.ts";
import { EventClock } from "../../src/sim/event_clock.ts";
import { fixedWindow } from "../support/params.ts";

ablate("resend");
const T0 = Date.UTC(2030, 0, 1);
const rule = { id: "w", params: fixedWindow(100, 60_000), version: 1 };
const never = <T>() => new Promise<T>(() => {});

describe("the tier without `resend`", () => {
  it("is off, and only it", () => {
    expect(uses("resend")).toBe(false);
    expect(uses("lateAnswers")).toBe(true);
  });

  it("an isolate's unanswered call is not sent again: its timeout stands after one more budget", async () => {
    const clock = new EventClock(T0);
    const st = new KeyState(
      { transport: { call: never, refund: never }, name: "w:k", rule, cost: 1, timeoutMs: 250, lease: null },
      T0,
    );
    let sent = 0;
    const again = async () => {
      sent++;
      return { answer: Promise.resolve<CallResult>({ atMs: T0, results: [], lease: null, replayed: false }) };
    };
    const timedOut = {
      kind: "failed",
      failure: "timeout",
      message: "",
      attempts: 1,
      late: never<CallResult>(),
    } as const;
    const deps = { clock: clock.clock, sleep: clock.sleep, counters: newStats() };
    let endedAtMs = 0;
    const out = awaitLate(deps, st, timedOut, again).finally(() => {
      endedAtMs = clock.nowMs() - T0;
    });
    await clock.runUntil(T0 + 1000);
    expect(await out).toMatchObject({ kind: "failed", failure: "timeout" });
    expect(sent).toBe(0);
    expect(endedAtMs).toBe(250);
  });

  it("a delegate's unanswered share ask is asked once and fails after DELEGATE_KEY_TIMEOUT_MS", async () => {
    const asks: string[] = [];
    const slept: number[] = [];
    let stored = NEW_DELEGATE;
    const run = new DelegateRun({
      clock: () => T0,
      newId: () => "ask",
      load: () => stored,
      save: (record) => {
        stored = record;
      },
      call: () => never(),
      share: (_object, ask) => {
        asks.push(ask.id);
        return never();
      },
      sleep: async (ms) => {
        slept.push(ms);
      },
    });
    await run.renew({ object: "w:k", holder: "weur.0", rule });
    expect(asks).toEqual(["ask"]);
    expect(slept).toEqual([DELEGATE_RESEND_MS, DELEGATE_KEY_TIMEOUT_MS - DELEGATE_RESEND_MS]);
    expect(stored.share).toBeNull();
  });
});
