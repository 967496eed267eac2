/**
 * The key's object's calls in a cluster SIMULATION run's first second (cluster.ts), by kind, so that the cold start's
 * floor is a number: isolates' first calls for the key made while their region had no hot mark (no isolate can know a
 * key hot before its own first answer or its data center's mark, src/isolate/hot_marks.ts), isolates' later direct
 * calls, batches delegates passed through, and the rest (delegates' share asks, refunds in a call of their own).
 */
import type { ObjectTransport } from "../protocol/object_call.ts";
import type { CallInput } from "../protocol/store.ts";
import type { SimMarks } from "./hot_marks.ts";

export interface FirstSecondCalls {
  readonly firstUnmarked: number;
  readonly laterDirect: number;
  readonly passedThrough: number;
  readonly sharesAndRefunds: number;
  /**
   * Of `firstUnmarked`, those sent before any data center's mark could be seen (the run's first
   * `MARK_PROPAGATION_MS` and a mark's write and read): the floor of what marks can save, whenever they are written.
   */
  readonly beforeAnyMark: number;
}

export class FirstSecondCount {
  /** Ids of isolates' direct calls, and of their first calls made while their region had no hot mark. */
  private readonly direct = new Set<string>();
  private readonly firstUnmarked = new Set<string>();
  private readonly beforeMarks = new Set<string>();
  private readonly counted = { firstUnmarked: 0, laterDirect: 0, passedThrough: 0, beforeAnyMark: 0 };

  /** `marksFromMs`: the earliest a mark can be seen (the run's start, a write's latency, the propagation, a read's). */
  constructor(
    private readonly endMs: number,
    private readonly marksFromMs: number,
    private readonly clock: () => number,
  ) {}

  /**
   * One isolate's transports, counted: `direct` to the key's object (else to a delegate); `called` is shared by all
   * of the isolate's transports (its first call for the key, wherever it went).
   */
  isolate(marks: SimMarks): (t: ObjectTransport, direct: boolean) => ObjectTransport {
    let called = false;
    return (t, direct) => ({
      ...t,
      call: (name: string, input: CallInput) => {
        if (!called && direct && !marks.holds(name)) {
          this.firstUnmarked.add(input.id);
          if (this.clock() < this.marksFromMs) this.beforeMarks.add(input.id);
        }
        if (direct) this.direct.add(input.id);
        called = true;
        return t.call(name, input);
      },
    });
  }

  /** A call the key's object applied at `atMs`. */
  applied(input: CallInput, atMs: number): void {
    if (atMs >= this.endMs) return;
    if (this.beforeMarks.has(input.id)) this.counted.beforeAnyMark++;
    if (this.firstUnmarked.has(input.id)) this.counted.firstUnmarked++;
    else if (this.direct.has(input.id)) this.counted.laterDirect++;
    else this.counted.passedThrough++;
  }

  /** The figures, given all calls the key's object applied in the first second. */
  of(all: number): FirstSecondCalls {
    const c = this.counted;
    return { ...c, sharesAndRefunds: all - c.firstUnmarked - c.laterDirect - c.passedThrough };
  }
}
