/**
 * Exact tables for the protocol's call plumbing, as pure code: where an object stores the call ids it remembers
 * (src/protocol/call_slots.ts) and one call to a key's object within a budget (src/protocol/object_call.ts).
 */
import { describe, expect, it } from "vitest";
import {
  CALL_KEY_PREFIX,
  CallSlots,
  callKey,
  RECORD_KEY,
  storedRecord,
  writesOf,
} from "../../src/protocol/call_slots.ts";
import {
  type CallAnswer,
  callObject,
  classify,
  firstAnswer,
  messageOf,
  type ObjectTransport,
} from "../../src/protocol/object_call.ts";
import {
  type AppliedCall,
  CALL_MEMORY_MAX,
  type CallInput,
  type CallResult,
  type LimiterRecord,
} from "../../src/protocol/store.ts";
import { fixedWindow } from "../support/params.ts";

const params = fixedWindow(5, 10_000);
const call = (id: string, atMs: number): AppliedCall => ({ id, atMs, verdicts: "1", leaseUnits: 0, leaseForMs: 0 });
const base: LimiterRecord = {
  v: 1,
  params,
  fingerprint: JSON.stringify(params),
  state: { windowIndex: 0, count: 1 } as never,
};

describe("call slots (call_slots.ts)", () => {
  it("names the record and each slot", () => {
    expect(RECORD_KEY).toBe("record");
    expect(CALL_KEY_PREFIX).toBe("call:");
    expect(callKey(0)).toBe("call:0");
    expect(callKey(127)).toBe("call:127");
  });

  it("stores the record without its calls, and the very record when it has none", () => {
    expect(storedRecord(base)).toBe(base);
    const withCalls = { ...base, calls: [call("a", 1)], leaseAsks: { ttlMs: 10, bucket: 1, curr: 2, prev: 0 } };
    const stored = storedRecord(withCalls);
    expect(stored).toEqual({ ...base, leaseAsks: { ttlMs: 10, bucket: 1, curr: 2, prev: 0 } });
    expect("calls" in stored).toBe(false);
  });

  it("hands out free slots from 0 up, then reuses the oldest call's", () => {
    const slots = new CallSlots();
    const taken = Array.from({ length: CALL_MEMORY_MAX }, () => slots.next());
    expect(taken).toEqual(Array.from({ length: CALL_MEMORY_MAX }, (_, i) => i));
    expect(slots.next()).toBe(0);
    expect(slots.next()).toBe(1);
    expect(slots.next()).toBe(2);
  });

  it("starts from the slots in use (oldest first) and hands out the lowest free ones first", () => {
    const slots = new CallSlots([5, 0, 2]);
    expect(slots.next()).toBe(1);
    expect(slots.next()).toBe(3);
    expect(slots.next()).toBe(4);
    expect(slots.next()).toBe(6);
    const full = new CallSlots(Array.from({ length: CALL_MEMORY_MAX }, (_, i) => (i + 7) % CALL_MEMORY_MAX));
    expect(full.next()).toBe(7);
    expect(full.next()).toBe(8);
  });

  it("forgets every slot when cleared", () => {
    const slots = new CallSlots([3, 4]);
    slots.clear();
    expect([slots.next(), slots.next(), slots.next()]).toEqual([0, 1, 2]);
    const full = new CallSlots(Array.from({ length: CALL_MEMORY_MAX }, (_, i) => CALL_MEMORY_MAX - 1 - i));
    full.clear();
    expect(Array.from({ length: CALL_MEMORY_MAX + 1 }, () => full.next())).toEqual([
      ...Array.from({ length: CALL_MEMORY_MAX }, (_, i) => i),
      0,
    ]);
  });

  it("loads the calls found in storage oldest first (ties by slot), skipping keys that are no slot", () => {
    const entries: [string, AppliedCall][] = [
      ["call:9", call("c", 30)],
      ["call:2", call("a", 10)],
      ["call:7", call("b2", 20)],
      ["call:4", call("b1", 20)],
      ["call:-1", call("x", 1)],
      ["call:128", call("y", 1)],
      ["call:1.5", call("z", 1)],
      ["call:127", call("last", 40)],
    ];
    const { slots, calls } = CallSlots.load(entries);
    expect(calls.map((c) => c.id)).toEqual(["a", "b1", "b2", "c", "last"]);
    // The loaded slots are in use: the lowest free one comes first, then (once all are taken) the oldest call's.
    expect(slots.next()).toBe(0);
    const rest = Array.from({ length: CALL_MEMORY_MAX - 6 }, () => slots.next());
    expect(rest).not.toContain(2);
    expect(rest).not.toContain(127);
    expect(slots.next()).toBe(2);
    expect(slots.next()).toBe(4);
    expect(slots.next()).toBe(7);
    expect(slots.next()).toBe(9);
    expect(slots.next()).toBe(127);
    expect(slots.next()).toBe(0);
  });

  it("loads slot 0 and an empty storage", () => {
    const one = CallSlots.load([["call:0", call("only", 5)]]);
    expect(one.calls).toEqual([call("only", 5)]);
    expect(one.slots.next()).toBe(1);
    const none = CallSlots.load([]);
    expect(none.calls).toEqual([]);
    expect(none.slots.next()).toBe(0);
  });

  it("writes the record without calls and only the call a change applied", () => {
    expect(writesOf(base, null)).toEqual({ record: null, call: null });
    expect(writesOf(null, base)).toEqual({ record: base, call: null });
    const first = { ...base, calls: [call("a", 1)] };
    expect(writesOf(base, first)).toEqual({ record: base, call: call("a", 1) });
    expect(writesOf(null, first)).toEqual({ record: base, call: call("a", 1) });
    const second = { ...first, calls: [...first.calls, call("b", 2)] };
    expect(writesOf(first, second)).toEqual({ record: base, call: call("b", 2) });
    // The same last call (a state change without a call of its own, or a replay): no call to write.
    // A record that lost its calls: no call to write.
    expect(writesOf(first, base)).toEqual({ record: base, call: null });
    // A replay of the newest call of three: nothing new.
    const third = { ...second, calls: [...second.calls, call("c", 3)] };
    expect(writesOf(third, { ...third, state: { windowIndex: 0, count: 2 } as never }).call).toBeNull();
    const refunded = { ...second, state: { windowIndex: 0, count: 0 } as never };
    const written = writesOf(second, refunded);
    expect(written.call).toBeNull();
    expect(written.record).toEqual({ ...base, state: { windowIndex: 0, count: 0 } });
  });
});

const rule = { id: "r", params };
const input: CallInput = { rule, id: "call-1", costs: [1] };
const answer: CallResult = { atMs: 7, results: [], lease: null, replayed: false };

/** A transport answering each attempt from a list (a value, or an error to throw), recording the calls. */
function scripted(attempts: (CallResult | { throws: unknown } | "never")[]) {
  const seen: { name: string; input: CallInput }[] = [];
  const transport: ObjectTransport = {
    call(name, input) {
      seen.push({ name, input });
      const next = attempts.shift();
      if (next === undefined) throw new Error("no more attempts scripted");
      if (next === "never") return new Promise<CallResult>(() => {});
      if ("throws" in next) return Promise.reject(next.throws);
      return Promise.resolve(next);
    },
    refund: () => Promise.resolve(null),
  };
  return { transport, seen };
}

/** An isolate whose sleeper resolves only when `fire` is called (a budget that runs out on cue), or never. */
function isolateOf() {
  let fire: () => void = () => {};
  const slept: number[] = [];
  const stats = { object_calls: 0, object_retries: 0 };
  const sleep = (ms: number) => {
    slept.push(ms);
    return new Promise<void>((resolve) => {
      fire = resolve;
    });
  };
  return { isolate: { sleep, stats }, stats, slept, fire: () => fire() };
}

describe("the first of two answers to the same call (object_call.ts `firstAnswer`)", () => {
  const fail = (message: string) => Promise.reject(Object.assign(new Error(message), { overloaded: true }));
  it("the first to answer, whichever was sent first; one failing waits for the other", async () => {
    const never = new Promise<number>(() => {});
    expect(await firstAnswer(Promise.resolve(1), never)).toBe(1);
    expect(await firstAnswer(never, Promise.resolve(2))).toBe(2);
    expect(await firstAnswer(fail("a"), Promise.resolve(2))).toBe(2);
    expect(await firstAnswer(Promise.resolve(1), fail("b"))).toBe(1);
  });

  it("both failing: the first call's failure, as it was (its fields classify it), never an aggregate", async () => {
    const both = firstAnswer(fail("first"), fail("second"));
    await expect(both).rejects.toMatchObject({ message: "first", overloaded: true });
    expect(classify(await both.catch((e: unknown) => e))).toEqual({ failure: "overloaded", retry: false });
  });
});

describe("one call within a budget (object_call.ts)", () => {
  it("classifies an error by its structured fields only", () => {
    expect(classify({ overloaded: true, retryable: true })).toEqual({ failure: "overloaded", retry: false });
    expect(classify({ durableObjectReset: true, retryable: true })).toEqual({ failure: "reset", retry: true });
    expect(classify({ retryable: true })).toEqual({ failure: "retryable", retry: true });
    expect(classify({ overloaded: "true", retryable: 1, durableObjectReset: "yes" })).toEqual({
      failure: "error",
      retry: false,
    });
    expect(classify(new Error("Durable Object is overloaded"))).toEqual({ failure: "error", retry: false });
    expect(classify(null)).toEqual({ failure: "error", retry: false });
    expect(classify(undefined)).toEqual({ failure: "error", retry: false });
    expect(classify("overloaded")).toEqual({ failure: "error", retry: false });
  });

  it("reads an error's message for the log", () => {
    expect(messageOf(new Error("boom"))).toBe("boom");
    expect(messageOf({ message: 42 })).toBe("42");
    expect(messageOf("plain")).toBe("plain");
    expect(messageOf(null)).toBe("null");
    expect(messageOf({ reason: "x" })).toBe("[object Object]");
  });

  it("answers at the first attempt, counting one call and no retry", async () => {
    const { transport, seen } = scripted([answer]);
    const { isolate, stats, slept } = isolateOf();
    const got = await callObject(transport, "obj", input, 250, isolate);
    expect(got).toEqual({ kind: "answered", result: answer, attempts: 1 });
    expect(stats).toEqual({ object_calls: 1, object_retries: 0 });
    expect(slept).toEqual([250]);
    expect(seen).toEqual([{ name: "obj", input }]);
  });

  it.each([
    [{ retryable: true, message: "network" }, "retryable"],
    [{ durableObjectReset: true, message: "reset" }, "reset"],
  ])("retries a %o error once with the same call id, and answers", async (error, _kind) => {
    const { transport, seen } = scripted([{ throws: error }, answer]);
    const { isolate, stats } = isolateOf();
    const got = await callObject(transport, "obj", input, 250, isolate);
    expect(got).toEqual({ kind: "answered", result: answer, attempts: 2 });
    expect(stats).toEqual({ object_calls: 2, object_retries: 1 });
    expect(seen.map((s) => s.input.id)).toEqual(["call-1", "call-1"]);
  });

  it("fails after the second retryable error, with its message", async () => {
    const { transport } = scripted([
      { throws: { retryable: true, message: "one" } },
      { throws: { retryable: true, message: "two" } },
    ]);
    const { isolate, stats } = isolateOf();
    const got = await callObject(transport, "obj", input, 250, isolate);
    expect(got).toEqual({ kind: "failed", failure: "retryable", message: "two", attempts: 2, late: null });
    expect(stats).toEqual({ object_calls: 2, object_retries: 1 });
  });

  it.each([
    [{ overloaded: true, retryable: true, message: "busy" }, "overloaded", "busy"],
    [new Error("plain"), "error", "plain"],
  ])("never retries %o", async (error, failure, message) => {
    const { transport } = scripted([{ throws: error }]);
    const { isolate, stats } = isolateOf();
    const got = await callObject(transport, "obj", input, 250, isolate);
    expect(got).toEqual({ kind: "failed", failure, message, attempts: 1, late: null });
    expect(stats).toEqual({ object_calls: 1, object_retries: 0 });
  });

  it("times out when the budget runs out first, handing back the call still running", async () => {
    let answerLate: (r: CallResult) => void = () => {};
    const late = new Promise<CallResult>((resolve) => {
      answerLate = resolve;
    });
    const transport: ObjectTransport = { call: () => late, refund: () => Promise.resolve(null) };
    const { isolate, stats, fire } = isolateOf();
    const pending = callObject(transport, "obj", input, 40, isolate);
    fire();
    const got: CallAnswer = await pending;
    expect(got).toEqual({ kind: "failed", failure: "timeout", message: "no answer within 40 ms", attempts: 1, late });
    expect(stats).toEqual({ object_calls: 1, object_retries: 0 });
    answerLate(answer);
    if (got.kind === "failed") expect(await got.late).toBe(answer);
  });

  it("times out on the retry, counting both attempts", async () => {
    const { transport } = scripted([{ throws: { retryable: true, message: "x" } }, "never"]);
    const { isolate, stats, fire } = isolateOf();
    const pending = callObject(transport, "obj", input, 40, isolate);
    await new Promise((r) => setTimeout(r, 0));
    fire();
    const got = await pending;
    expect(got.kind === "failed" && got.failure).toBe("timeout");
    expect(got.attempts).toBe(2);
    expect(stats).toEqual({ object_calls: 2, object_retries: 1 });
  });
});
