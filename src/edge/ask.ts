/**
 * The "ask" step of the request path: one rule's answer for one request, never an exception. `scope: local` rules
 * are decided in this isolate; `scope: global` rules by their Durable Object within the rule's time budget (through
 * the isolate's coalescer: one call in flight per key, the requests that arrive meanwhile in the next call, and the
 * rule's lease if it has one, see coalesce.ts), unless this isolate already knows the object's denial (the gateway
 * looked it up once and passes it in).
 */
import { type Decision, fingerprintOf, leasePolicy } from "../algorithms/index.ts";
import type { DelegateRoute } from "../isolate/coalesce.ts";
import {
  type HotMarkStore,
  hotByConstruction,
  markFrom,
  spreadOfMark,
  WrittenMarks,
  writeMark,
} from "../isolate/hot_marks.ts";
import type { Isolate } from "../isolate/isolate.ts";
import { ownShardOf } from "../isolate/key_state.ts";
import type { Source } from "../isolate/metrics.ts";
import { delegateIdOf, delegateNameOf, objectNameOf } from "../object/names.ts";
import { delegateTransport, durableObjectTransport } from "../object/transport.ts";
import type { FailureKind } from "../protocol/object_call.ts";
import type { CheckResult, RefundResult } from "../protocol/store.ts";
import { DELEGATE_SHARDS } from "../protocol/tunables.ts";
import type { Applicable, CompiledRule } from "../request/match.ts";
import { cacheMarks } from "./hot_mark_cache.ts";
import type { Env, Settings } from "./settings.ts";

/** What asking one rule produced. */
export type AskResult =
  | {
      readonly kind: "decided";
      readonly app: Applicable;
      readonly decision: Decision;
      readonly source: Source;
      readonly atMs: number;
      readonly refund: () => Promise<RefundResult>;
      /** The slot the admission took (a concurrency rule's), to give back when the request ends; absent: none. */
      readonly slot?: number;
    }
  | {
      readonly kind: "failed";
      readonly app: Applicable;
      readonly reason: "fail_open" | "fail_closed";
      readonly failure: FailureKind;
      readonly error: string;
      readonly attempts: number;
      /** The answer that arrived too late, if the call is still running: refunded if the request ends up denied. */
      readonly late: Promise<CheckResult> | null;
      readonly refund: (admittedAtMs: number) => Promise<RefundResult>;
    };

/** Everything `ask` may use besides the rule: bindings, settings, this isolate. */
export interface AskContext {
  readonly env: Env;
  readonly settings: Settings;
  readonly isolate: Isolate;
  /** The request's context, to keep background work alive (a lease's return at its end). */
  readonly ctx?: ExecutionContext;
  /** The region the request came in through (src/request/region.ts): whose delegate a hot key's batches go to. */
  readonly region?: string | null;
}

/**
 * Ask one rule about the request. `known` is this isolate's cached denial for the rule's object, if any (only shadow
 * rules get here with one: a known enforcing denial refuses the request before anyone is asked).
 */
export function ask(cx: AskContext, app: Applicable, known: Decision | null): Promise<AskResult> {
  if (app.compiled.rule.scope === "local") return Promise.resolve(askLocal(cx, app));
  if (known !== null) {
    cx.isolate.stats.cache_answers++;
    const atMs = cx.isolate.clock();
    return Promise.resolve({ kind: "decided", app, decision: known, source: "cache", atMs, refund: noRefund });
  }
  return askObject(cx, app);
}

const noRefund = () => Promise.resolve(null);

const failureReason = (app: Applicable) => (app.compiled.rule.onError === "closed" ? "fail_closed" : "fail_open");

function askLocal({ settings, isolate }: AskContext, app: Applicable): AskResult {
  const { compiled, keyHash, cost } = app;
  const atMs = isolate.clock();
  const refund = (admittedAtMs: number) =>
    Promise.resolve(isolate.local.refund(compiled, settings.maxKeys, keyHash, cost, admittedAtMs, isolate.clock()));
  const result = isolate.local.check(compiled, settings.maxKeys, keyHash, cost, atMs);
  if (!result.ok) {
    const reason = failureReason(app);
    return { kind: "failed", app, reason, failure: "invalid", error: result.error, attempts: 0, late: null, refund };
  }
  return { kind: "decided", app, decision: result.decision, source: "local", atMs, refund: () => refund(atMs) };
}

async function askObject({ env, settings, isolate, ctx, region }: AskContext, app: Applicable): Promise<AskResult> {
  const { compiled, keyHash, cost } = app;
  const { rule, params } = compiled;
  const name = objectNameOf(rule.id, keyHash);
  // What the object answers, this isolate remembers (a denial) or forgets (an admission) in the object's order.
  const observe = (result: CheckResult, sentAtMs: number) => {
    if (!result.ok) return;
    if (result.decision.allowed) isolate.blocked.forget(name);
    else isolate.blocked.remember(name, fingerprintOfRule(compiled), params, cost, sentAtMs, result.decision);
  };
  const arrivedAtMs = isolate.clock();
  const delegate = delegateOf(env, name, region ?? null);
  const keepAlive = ctx === undefined ? undefined : (work: Promise<unknown>) => ctx.waitUntil(work);
  // A key this isolate does not track yet (or whose hot spell here lapsed), of a rule that takes shares: its data
  // center may know it is hot, and a fast rule's is hot by construction, whatever its key (hot_marks.ts).
  const shares = delegate !== null && leasePolicy(params.algorithm).kind !== "none";
  const store = shares ? hotMarks() : null;
  const hot = shares && hotByConstruction(params);
  const read = (store !== null || hot) && !isolate.calls.tracks(name);
  const stored = read && store !== null ? await store.read(name) : null;
  // One call in flight per key: this request goes now, or in the next call with the others that arrive meanwhile.
  const asked = await isolate.calls.ask({
    transport: durableObjectTransport(env.LIMITER),
    name,
    rule: { id: rule.id, params, version: compiled.version },
    cost,
    timeoutMs: settings.limiterTimeoutMs ?? rule.timeoutMs,
    lease: rule.lease,
    delegate,
    keepAlive,
    observe,
    ...(read ? { hotMark: markFrom(stored, isolate.clock(), hot) } : {}),
    ...(store === null ? {} : { spreadMark: spreadOfMark(store, isolate.clock) }),
  });
  if (shares) markHot(isolate, name, keepAlive);
  // A refund can make the object more generous than a denial this isolate remembers.
  const forgetting =
    <A extends unknown[]>(refund: (...args: A) => Promise<RefundResult>) =>
    (...args: A) => {
      isolate.blocked.forgetRefunded(name, isolate.clock());
      return refund(...args);
    };
  const reason = failureReason(app);
  if (asked.kind === "failed") {
    const { failure, message, attempts, late } = asked;
    return { kind: "failed", app, reason, failure, error: message, attempts, late, refund: forgetting(asked.refund) };
  }
  const { result, attempts } = asked;
  if (!result.ok) {
    const refund = forgetting(asked.refund);
    return { kind: "failed", app, reason, failure: "invalid", error: result.error, attempts, late: null, refund };
  }
  // The object's answers were observed as the call answered; a lease's (this isolate's own) are seen here.
  if (asked.source === "lease") observe(result, arrivedAtMs);
  const { decision, atMs, slot } = result;
  const held = slot === undefined ? {} : { slot };
  return { kind: "decided", app, decision, source: asked.source, atMs, refund: forgetting(asked.refund), ...held };
}

/** This isolate's data center's hot marks (`null`: no Cache API here), and the marks it wrote lately. */
let marksStore: HotMarkStore | null | undefined;
const hotMarks = (): HotMarkStore | null => {
  marksStore ??= cacheMarks();
  return marksStore;
};
const written = new WrittenMarks();

/** Mark the key hot for the data center if this isolate knows it hot (or its spread rose) and has not lately. */
function markHot(isolate: Isolate, name: string, keepAlive: ((work: Promise<unknown>) => void) | undefined): void {
  const mark = isolate.calls.markOf(name);
  const store = mark === null ? null : hotMarks();
  if (store === null || mark === null || !written.take(name, mark, isolate.clock())) return;
  const work = writeMark(store, name, mark, (spread) => isolate.calls.spreadTo(name, spread), isolate.clock);
  if (keepAlive === undefined) void work;
  else keepAlive(work);
}

/**
 * This isolate's own delegate shard and draw (key_state.ts `ownShardOf`): hashes of an id drawn on first use (not at
 * module load, where the runtime refuses random values), so a region's isolates spread evenly over its shards.
 */
let isolateShard: { readonly shard: number; readonly draw: number } | undefined;
export function shardOfIsolate(): { readonly shard: number; readonly draw: number } {
  isolateShard ??= ownShardOf(crypto.randomUUID());
  return isolateShard;
}

/** Fix this isolate's own shard and draw (tests: where it moves when the first is busy; shard 0: it never moves). */
export function pinIsolateShard(shard: number, draw = 0): void {
  isolateShard = { shard: shard % DELEGATE_SHARDS, draw };
}

/**
 * The region's delegate for a key's object, when the Worker has the `DELEGATE` binding: the first shard, and this
 * isolate's own shard to move to when the first says it is busy (the spread above its draw).
 */
export function delegateOf(
  env: AskContext["env"],
  object: string,
  region: string | null,
  own = shardOfIsolate(),
): DelegateRoute | null {
  const namespace = env.DELEGATE;
  if (namespace === undefined) return null;
  const route = (s: number): DelegateRoute => ({
    transport: delegateTransport(namespace, object, delegateIdOf(region, s), region),
    name: delegateNameOf(object, region, s),
  });
  return own.shard === 0 ? route(0) : { ...route(0), ownShard: route(own.shard), draw: own.draw };
}

const fingerprints = new WeakMap<CompiledRule, string>();
/** The rule's parameter fingerprint, computed once per compiled rule (the blocked-key cache keys entries by it). */
export function fingerprintOfRule(compiled: CompiledRule): string {
  let fp = fingerprints.get(compiled);
  if (fp === undefined) {
    fp = fingerprintOf(compiled.params);
    fingerprints.set(compiled, fp);
  }
  return fp;
}
