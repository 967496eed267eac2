/**
 * One run of the cluster SIMULATION (bench/cluster.ts): one hot key, many isolates in 9 regions, the key's object and
 * (with the tier) `DELEGATE_SHARDS` delegates per region, over simulated time. The code deciding is the real code: each isolate's
 * coalescer (src/isolate/coalesce.ts: leases, batches, refunds, last-known answers, the switch to a delegate), the
 * key's object's record operations (share.ts `keyCall`, share_grant.ts `shareRecord`, store.ts `refundRecord`), the
 * delegate's decisions (src/protocol/delegate.ts, driven as its Durable Object drives them: delegate.ts here) and the
 * pure core. Simulated: time, the network (a round trip by region; each one-way delay heavy-tailed and 0.1% of
 * messages lost: network.ts), data centers' hot marks, clients that move between regions, and each object's service
 * rate (server.ts: 1 ms per call plus a cost per KB of what the call carries and writes).
 */
import type { AlgorithmState } from "../algorithms/index.ts";
import { carryOver, decide } from "../algorithms/index.ts";
import { mulberry32 } from "../cli/gen.ts";
import {
  type Asked,
  type AskInput,
  type CoalesceCounters,
  Coalescer,
  type DelegateRoute,
} from "../isolate/coalesce.ts";
import { hotByConstruction, markFrom, spreadOfMark, WrittenMarks, writeMark } from "../isolate/hot_marks.ts";
import { ownShardOf } from "../isolate/key_state.ts";
import { newStats } from "../isolate/metrics.ts";
import { directParts, shareKindOf } from "../protocol/share.ts";
import type { LimiterRule } from "../protocol/store.ts";
import { DELEGATE_SHARDS } from "../protocol/tunables.ts";
import { Answers } from "./answers.ts";
import { type Arrival, arrivalsOf } from "./arrivals.ts";
import { SimDelegate } from "./delegate.ts";
import { EventClock } from "./event_clock.ts";
import { type FirstSecondCalls, FirstSecondCount } from "./first_second.ts";
import { MARK_LATENCY_MS, SimMarks } from "./hot_marks.ts";
import { DATA_CENTERS_PER_REGION, type Link, linkOf, MARK_PROPAGATION_MS, MOVED_REQUEST_RATE } from "./network.ts";
import { SimObject } from "./object.ts";
import { type DeniedBy, type LedgerBins, type RateLedger, RateLedgerCount } from "./rate_ledger.ts";
import type { SimServerOptions } from "./server.ts";

/** Round trips from each of the 9 regions to the key's object, ms. */
export const REGION_RTT_MS = [5, 20, 35, 50, 70, 90, 110, 130, 150];
export const REGIONS = ["wnam", "enam", "sam", "weur", "eeur", "apac", "oc", "afr", "me"];
/** Round trip from an isolate to its region's delegate, ms. */
export const DELEGATE_RTT_MS = 10;
/** Each object: 1 ms per call plus 0.007 ms per KB, `overloaded` beyond 100 queued (about 1,000 calls/s at most). */
export const OBJECT: SimServerOptions = { serviceMs: 1, maxBacklog: 100, perKbMs: 0.007 };
const TIMEOUT_MS = 250;

export type Scenario =
  | "steady"
  /** Steady, over a longer run: what the fixed costs (cold start, convergence, tokens out) weigh over 60 s. */
  | "long run"
  | "redeploy"
  | "override change"
  | "two versions 50/50"
  | "churn"
  /** 5% of the load, then all of it at a quarter of the run (src/sim/arrivals.ts `loadShare`). */
  | "flash crowd"
  /** The load rising evenly from 0 to all of it over the run. */
  | "growth"
  | "object restart"
  | "delegate restart"
  | "half refunded"
  | "clock skew";

export interface ClusterRun {
  /** The rule as it ships (version 1), and the same rule lowered (version 2: an override change, a new version). */
  readonly rule: LimiterRule;
  readonly lowered: LimiterRule;
  readonly isolates: number;
  readonly loadPerS: number;
  readonly durationMs: number;
  readonly scenario: Scenario;
  /** Start of the run (a window's middle, so that runs cross a window's end). */
  readonly t0Ms: number;
  /** With the delegate tier (each isolate's region has a delegate). */
  readonly tier: boolean;
  /** Every request its own key (one call per request, nothing shared): the reference for identical decisions. */
  readonly plain?: boolean;
  /** Without the data centers' hot marks (src/isolate/hot_marks.ts; with the tier they are on by default). */
  readonly noMarks?: boolean;
  /** The rate ledger's bins (rate_ledger.ts; absent: the first 2 s per 100 ms). */
  readonly ledgerBins?: LedgerBins;
  readonly seed: number;
}

export type { Arrival };

export interface ClusterOutcome {
  readonly arrivals: readonly Arrival[];
  /** When each admission counts (the object's or delegate's decision time; an isolate's answer time from a lease). */
  readonly admissions: readonly number[];
  /** Each request's answer, in arrival order: 1 admitted, 0 refused, f failed open. */
  readonly verdicts: string;
  readonly latencies: readonly number[];
  readonly failedOpen: Record<string, number>;
  readonly lastKnown: number;
  readonly fromLease: number;
  readonly key: SimObject;
  readonly delegates: readonly SimDelegate[];
  /** Overloaded calls on the key's object, and on any delegate, in the first second. */
  readonly overloadedFirstSecond: number;
  /** When the scenario's event happened (redeploy, restart), if it has one. */
  readonly eventAtMs: number | null;
  /** When the newest rule version reached its first isolate (`Infinity`: never). */
  readonly newestFromMs: number;
  /** The key's object's calls applied in the run's first second, by kind (first_second.ts). */
  readonly keyFirstSecondBy: FirstSecondCalls;
  /** A rate rule's token ledger (rate_ledger.ts), the exact writer's side still to add (`withExact`). */
  readonly ledger: RateLedger | null;
}

interface Isolate {
  readonly coalescer: Coalescer;
  readonly region: number;
  readonly clock: () => number;
  readonly written: WrittenMarks;
  readonly transport: ReturnType<SimObject["transportFrom"]>;
  readonly delegate: DelegateRoute | null;
  /** Its route for a request whose client is in the next region (network.ts `MOVED_REQUEST_RATE`). */
  readonly movedDelegate: DelegateRoute | null;
  /** Its data center's hot marks. */
  readonly marks: SimMarks;
  /** When this isolate starts asking under the lowered rule (`Infinity`: never). */
  readonly switchAtMs: number;
}

/** The simulated world of one run: the key's object, a delegate per region, and the isolates (replaced on events). */
class World {
  readonly clock: EventClock;
  readonly random: () => number;
  readonly key: SimObject;
  readonly delegates: SimDelegate[];
  /** Each data center's hot marks (its Cache API): region r's data center d is marks[r * DATA_CENTERS_PER_REGION + d]. */
  readonly marks: SimMarks[];
  readonly counted: CoalesceCounters[] = [];
  /** When each result was decided (the key's object's or a delegate's clock). */
  readonly decidedAt = new WeakMap<object, number>();
  /** Who refused each refused result the key's object or a delegate decided (the rate ledger). */
  readonly deniedBy = new WeakMap<object, DeniedBy>();
  readonly ledger: RateLedgerCount | null;
  isolates: Isolate[];
  readonly firstSecond: FirstSecondCount;
  private ids = 0;

  constructor(private readonly run: ClusterRun) {
    this.clock = new EventClock(run.t0Ms);
    this.random = mulberry32(run.seed);
    const marksFromMs = run.t0Ms + 2 * MARK_LATENCY_MS + MARK_PROPAGATION_MS;
    this.firstSecond = new FirstSecondCount(run.t0Ms + 1000, marksFromMs, () => this.clock.nowMs());
    const rate = shareKindOf(run.rule.params) === "rate" && !run.plain;
    const end = run.t0Ms + run.durationMs;
    this.ledger = rate ? new RateLedgerCount(run.rule, run.t0Ms, end, this.clock.clock, run.ledgerBins) : null;
    this.key = new SimObject(this.clock, OBJECT, (input, result) => {
      const book = this.key.record?.shares;
      const by =
        book?.direct !== undefined && directParts(book, this.clock.nowMs()) === 0 ? "keyNoParts" : "keyNoTokens";
      for (const r of result.results) {
        this.decidedAt.set(r, this.clock.nowMs());
        if (r.ok && !r.decision.allowed) this.deniedBy.set(r, by);
      }
      this.firstSecond.applied(input, this.clock.nowMs());
    });
    if (this.ledger !== null) this.key.onWrite = this.ledger.keyWrote.bind(this.ledger);
    const watch = this.ledger?.watch(this.deniedBy) ?? null;
    // Region r's shard s is delegates[r * DELEGATE_SHARDS + s].
    this.delegates = REGIONS.flatMap((region, r) =>
      Array.from(
        { length: DELEGATE_SHARDS },
        (_, s) =>
          new SimDelegate(
            this.clock,
            OBJECT,
            `${region}.${s}`,
            {
              calls: this.key.transportFrom(this.link(`${region}.${s} calls`, REGION_RTT_MS[r]!)),
              shares: this.key.shareFrom(this.link(`${region}.${s} shares`, REGION_RTT_MS[r]!)),
              name: "key",
            },
            this.decidedAt,
            watch,
          ),
      ),
    );
    this.marks = Array.from({ length: REGIONS.length * DATA_CENTERS_PER_REGION }, () => new SimMarks(this.clock));
    this.isolates = Array.from({ length: run.isolates }, (_, i) => this.makeIsolate(i));
  }

  /**
   * One request through an isolate: a key it does not track yet is looked up in its data center's hot marks first (a
   * fast rule's is hot by construction, whatever its key: hot_marks.ts `hotByConstruction`); after the answer, the
   * isolate marks the key if it now knows it hot (or moved to its own shard) and has not lately.
   */
  async ask(iso: Isolate, input: AskInput): Promise<Asked> {
    const { run } = this;
    const tier = run.tier && !run.plain;
    const marks = tier && !run.noMarks ? iso.marks : null;
    const hot = tier && hotByConstruction(input.rule.params);
    if (marks === null && !hot) return iso.coalescer.ask(input);
    const read = !iso.coalescer.tracks(input.name);
    const stored = marks !== null && read ? await marks.read(input.name) : null;
    const answer = await iso.coalescer.ask({
      ...input,
      ...(marks === null ? {} : { spreadMark: spreadOfMark(marks, iso.clock) }),
      ...(read ? { hotMark: markFrom(stored, iso.clock(), hot) } : {}),
    });
    const mark = marks === null ? null : iso.coalescer.markOf(input.name);
    if (marks !== null && mark !== null && iso.written.take(input.name, mark, iso.clock()))
      void writeMark(marks, input.name, mark, (spread) => iso.coalescer.spreadTo(input.name, spread), iso.clock);
    return answer;
  }

  /** A link with this median round trip: its own delays (heavy-tailed) and losses (network.ts `linkOf`). */
  link(name: string, rttMs: number): Link {
    return linkOf(this.run.seed, name, rttMs, mulberry32);
  }

  newId(): string {
    return `c${this.ids++}`;
  }

  makeIsolate(i: number): Isolate {
    const { run, clock } = this;
    const region = i % REGIONS.length;
    const me = `isolate ${this.counted.length}`; // its links' name: isolates made so far, in the same order every run
    const skewMs = run.scenario === "clock skew" ? Math.floor((this.random() - 0.5) * 1000) : 0;
    const counters: CoalesceCounters = newStats();
    this.counted.push(counters);
    const isoClock = () => clock.nowMs() + skewMs;
    const coalescer = new Coalescer({
      clock: isoClock,
      sleep: clock.sleep,
      counters,
      newId: () => this.newId(),
    });
    // Half the isolates on the lowered rule for the whole run; or all of them switching over one second mid-run.
    const midMs = run.t0Ms + run.durationMs / 2;
    const switchAtMs =
      run.scenario === "two versions 50/50"
        ? i % 2 === 0
          ? run.t0Ms
          : Number.POSITIVE_INFINITY
        : run.scenario === "override change"
          ? midMs + Math.floor(this.random() * 1000)
          : Number.POSITIVE_INFINITY;
    const marks =
      this.marks[region * DATA_CENTERS_PER_REGION + (Math.floor(i / REGIONS.length) % DATA_CENTERS_PER_REGION)]!;
    // Its first shard, and its own (by a hash of the isolate, as the Worker's `shardOfIsolate`) to move to; in its
    // region, and in the next (a moved client's requests: the Worker routes by the request's region).
    const counted = this.firstSecond.isolate(marks);
    const own = ownShardOf(`isolate-${i}-${this.ids}`);
    const routes = (r: number): DelegateRoute | null => {
      if (!run.tier) return null;
      const link = (s: number) => this.link(`${me} to ${r}.${s}`, DELEGATE_RTT_MS);
      const route = (s: number): DelegateRoute => ({
        transport: counted(this.delegates[r * DELEGATE_SHARDS + s]!.transportFrom(link(s)), false),
        name: `delegate:${REGIONS[r]}.${s}`,
      });
      return { ...route(0), ownShard: route(own.shard), draw: own.draw };
    };
    const transport = counted(this.key.transportFrom(this.link(`${me} to key`, REGION_RTT_MS[region]!)), true);
    return {
      coalescer,
      region,
      clock: isoClock,
      written: new WrittenMarks(),
      transport,
      delegate: routes(region),
      movedDelegate: routes((region + 1) % REGIONS.length),
      marks,
      switchAtMs,
    };
  }

  /** Every ms of the run: the rate ledger's sample of the key's and the delegates' records. */
  sampleLedger(): void {
    if (this.ledger === null) return;
    const lastKnown = this.counted.reduce((n, c) => n + (c.last_known_answers ?? 0), 0);
    this.ledger.sample(this.clock.nowMs(), this.key.record, this.delegates, lastKnown);
    if (this.clock.nowMs() < this.run.t0Ms + this.run.durationMs) this.clock.after(1, () => this.sampleLedger());
  }

  /** Overloaded calls on every object so far. */
  overloaded(): number {
    return this.key.counters.overloaded + this.delegates.reduce((n, d) => n + d.server.counters.overloaded, 0);
  }

  /** Schedule the scenario's event (a redeploy, a restart, churn); returns when it happens, if it is one event. */
  schedule(): number | null {
    const { run, clock } = this;
    const midMs = run.t0Ms + run.durationMs / 2;
    const at = (ms: number, fn: () => void) => clock.after(ms - run.t0Ms, fn);
    switch (run.scenario) {
      case "redeploy":
        at(midMs, () => {
          this.isolates = this.isolates.map((_, i) => this.makeIsolate(i));
          for (const d of this.delegates) d.restart(50);
        });
        return midMs;
      case "delegate restart":
        at(midMs, () => {
          for (const d of this.delegates) d.restart(100);
        });
        return midMs;
      case "object restart":
        at(midMs, () => this.key.restart(100));
        return midMs;
      case "churn":
        for (let s = 1; s * 1000 < run.durationMs; s++) {
          at(run.t0Ms + s * 1000, () => {
            for (let i = 0; i < run.isolates; i++) if (this.random() < 0.1) this.isolates[i] = this.makeIsolate(i);
          });
        }
        return null;
      default:
        return null;
    }
  }

  /** The rule an isolate asks under at `atMs` (a redeploy bumps the version; a lowered rule from its switch). */
  ruleOf(iso: Isolate, atMs: number): LimiterRule {
    const { run } = this;
    if (run.scenario === "redeploy" && atMs >= run.t0Ms + run.durationMs / 2) return { ...run.rule, version: 2 };
    return atMs >= iso.switchAtMs ? run.lowered : run.rule;
  }
}

export async function simulateCluster(run: ClusterRun): Promise<ClusterOutcome> {
  const world = new World(run);
  const { clock } = world;
  const newestFromMs = Math.min(...world.isolates.map((x) => x.switchAtMs));
  let overloadedFirstSecond = 0;
  clock.after(1000, () => {
    overloadedFirstSecond = world.overloaded();
  });
  const eventAtMs = world.schedule();
  world.sampleLedger();
  const shape = run.scenario === "flash crowd" || run.scenario === "growth" ? run.scenario : "steady";
  const arrivals = arrivalsOf({ ...run, shape }, world.random);
  const answers = new Answers(run.scenario === "half refunded", world.decidedAt, world.deniedBy, world.ledger);
  const pending: Promise<void>[] = [];
  for (const [index, a] of arrivals.entries()) {
    await clock.runUntil(a.atMs);
    const iso = world.isolates[a.isolate]!;
    const moved = world.random() < MOVED_REQUEST_RATE;
    const asked = world.ask(iso, {
      transport: iso.transport,
      name: run.plain ? `plain-${world.newId()}` : "hot",
      rule: world.ruleOf(iso, a.atMs),
      cost: 1,
      timeoutMs: TIMEOUT_MS,
      lease: null,
      delegate: run.plain ? null : moved ? iso.movedDelegate : iso.delegate,
    });
    pending.push(asked.then((answer) => answers.take(answer, a.atMs, clock.nowMs(), index)));
  }
  await clock.runUntil(run.t0Ms + run.durationMs + 5_000);
  await Promise.all(pending);
  return {
    arrivals,
    admissions: answers.admissions,
    verdicts: answers.verdicts.join(""),
    latencies: answers.latencies,
    failedOpen: answers.failedOpen,
    lastKnown: world.counted.reduce((n, c) => n + (c.last_known_answers ?? 0), 0),
    fromLease: answers.fromLease,
    key: world.key,
    delegates: world.delegates,
    overloadedFirstSecond,
    eventAtMs,
    newestFromMs,
    keyFirstSecondBy: world.firstSecond.of(world.key.server.callsInSecond(run.t0Ms)),
    ledger: world.ledger?.finish(answers.admissions) ?? null,
  };
}

/**
 * When an exact single writer admits: the pure core deciding every arrival at its arrival time, under the newest rule
 * version in effect (the lowered rule from the first isolate that switched), a refunded admission given back at once.
 */
export function exactAdmissions(run: ClusterRun, arrivals: readonly Arrival[], newestFromMs: number): number[] {
  let state: AlgorithmState | null = null;
  let params = run.rule.params;
  let refundNext = false;
  const out: number[] = [];
  for (const a of arrivals) {
    const newest = a.atMs >= newestFromMs ? run.lowered.params : run.rule.params;
    if (newest !== params) {
      state = state === null ? null : carryOver(params, newest, state, a.atMs);
      params = newest;
    }
    const decided = decide(params, state, 1, a.atMs);
    if (!decided.ok) continue;
    if (decided.decision.allowed && run.scenario === "half refunded") {
      refundNext = !refundNext;
      if (refundNext) continue; // given back: as if never charged
    }
    state = decided.state;
    if (decided.decision.allowed) out.push(a.atMs);
  }
  return out;
}
