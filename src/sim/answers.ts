/**
 * What the requests of one cluster SIMULATION run (cluster.ts) were answered: when each admission counts, the
 * verdicts, the latencies and the failures, as the bench reads them.
 */
import type { Asked } from "../isolate/coalesce.ts";
import type { DeniedBy } from "./rate_ledger.ts";

/** What the requests were answered: admissions (when they count), verdicts, latencies, failures. */
export class Answers {
  readonly admissions: number[] = [];
  readonly latencies: number[] = [];
  /** By arrival index (`take`'s `index`): answers come back out of order. */
  readonly verdicts: string[] = [];
  readonly failedOpen: Record<string, number> = {};
  fromLease = 0;
  private refundNext = false;

  /** `halfRefunded`: every other admission is refunded (another rule denied it). */
  constructor(
    private readonly halfRefunded: boolean,
    private readonly decidedAt: WeakMap<object, number>,
    /** Who decided each result the key's object or a delegate refused, and the rate ledger to tell (rate_ledger.ts). */
    private readonly deniedBy: WeakMap<object, DeniedBy> = new WeakMap(),
    private readonly ledger: {
      denied(by: DeniedBy, atMs: number): void;
      fromLease(atMs: number): void;
    } | null = null,
  ) {}

  take(answer: Asked, arrivedAtMs: number, nowMs: number, index: number): void {
    this.latencies.push(nowMs - arrivedAtMs);
    if (answer.kind === "failed") {
      this.failedOpen[answer.failure] = (this.failedOpen[answer.failure] ?? 0) + 1;
      this.admissions.push(nowMs); // on_error: open
      this.verdicts[index] = "f";
      return;
    }
    if (answer.source === "lease") this.fromLease++;
    const r = answer.result;
    const allowed = r.ok && r.decision.allowed;
    this.verdicts[index] = allowed ? "1" : "0";
    if (!allowed) {
      if (r.ok)
        this.ledger?.denied(answer.source === "lease" ? "isolateLocal" : (this.deniedBy.get(r) ?? "unknown"), nowMs);
      return;
    }
    if (answer.source === "lease") this.ledger?.fromLease(nowMs);
    if (this.halfRefunded) {
      this.refundNext = !this.refundNext;
      if (this.refundNext) {
        void answer.refund();
        return;
      }
    }
    // A decision counts when it was made: by the key's object or a delegate (its clock), or from this isolate's lease.
    this.admissions.push(answer.source === "lease" ? nowMs : (this.decidedAt.get(r) ?? r.atMs));
  }
}
