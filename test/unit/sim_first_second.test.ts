/**
 * The cluster simulation's first-second accounting (src/sim/first_second.ts): which of the key's object's calls were
 * isolates' first calls made while their data center had no hot mark, their later direct calls, and batches passed
 * through by delegates; only calls applied within the first second count.
 */
import { describe, expect, it } from "vitest";
import type { ObjectTransport } from "../../src/protocol/object_call.ts";
import type { CallInput, CallResult } from "../../src/protocol/store.ts";
import { EventClock } from "../../src/sim/event_clock.ts";
import { FirstSecondCount } from "../../src/sim/first_second.ts";
import { SimMarks } from "../../src/sim/hot_marks.ts";
import { MARK_PROPAGATION_MS } from "../../src/sim/network.ts";
import { fixedWindow } from "../support/params.ts";

const T0 = Date.UTC(2030, 0, 1);
const rule = { id: "r", params: fixedWindow(10, 1000) };
const input = (id: string): CallInput => ({ rule, id, costs: [1], giveBack: [] });
const answered: CallResult = { atMs: T0, results: [], lease: null, replayed: false };
const sent: string[] = [];
const transport: ObjectTransport = {
  call: async (_name, i) => {
    sent.push(i.id);
    return answered;
  },
  refund: async () => ({ ok: true, remaining: 0 }) as never,
};

describe("FirstSecondCount", () => {
  it("splits the first second's calls: first unmarked (and of them, before any mark), later direct, passed through, the rest", async () => {
    const clock = new EventClock(T0);
    const marks = new SimMarks(clock);
    // Marks can be seen from a write's and a read's latency (1 ms each) and the propagation after the run's start.
    const count = new FirstSecondCount(T0 + 1000, T0 + 2 + MARK_PROPAGATION_MS, () => clock.nowMs());
    // Isolate a: its first call goes to the key's object with no mark (counted), then a second direct call.
    const a = count.isolate(marks);
    await a(transport, true).call("hot", input("a1"));
    await a(transport, true).call("hot", input("a2"));
    // Isolate b: its first call goes to its delegate, then one direct (a later direct call, not a first).
    const b = count.isolate(marks);
    await b(transport, false).call("hot", input("b1"));
    await b(transport, true).call("hot", input("b2"));
    // Isolate c: its first call direct, but its region marked the key hot meanwhile (not the cold start's floor).
    const written = marks.write("hot", { spread: false });
    await clock.runUntil(T0 + 5 + MARK_PROPAGATION_MS);
    await written;
    const c = count.isolate(marks);
    await c(transport, true).call("hot", input("c1"));
    // Isolate d: its first call direct, unmarked (another key), after marks could be seen: not before any mark.
    const d = count.isolate(marks);
    await d(transport, true).call("other", input("d1"));
    expect(sent).toEqual(["a1", "a2", "b1", "b2", "c1", "d1"]);
    for (const id of ["a1", "a2", "b2", "c1", "d1", "passed"]) count.applied(input(id), T0 + 999);
    count.applied(input("a2"), T0 + 1000); // after the first second: not counted
    expect(count.of(8)).toEqual({
      firstUnmarked: 2,
      laterDirect: 3,
      passedThrough: 1,
      beforeAnyMark: 1,
      sharesAndRefunds: 2,
    });
  });
});
