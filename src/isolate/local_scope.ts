/**
 * `scope: local` rules: decided in this isolate's memory by the same pure core, with no Durable Object call, in the
 * packed store of local_store.ts (a typed-array table per rule keyed by a 64-bit hash of the key hash, ~30 B per key,
 * bounded by `MAX_KEYS` with exact least-recently-used eviction, as NGINX's limit_req zone).
 *
 * Approximate by design: each isolate (and each Cloudflare location) counts alone, so N isolates admit up to N times
 * the limit; an evicted key starts again with a full allowance; state is lost when the isolate goes away (a redeploy
 * starts every isolate afresh, so there is no carry-over across rule changes either). A flood of new keys (rotating
 * addresses) can evict real keys: size `MAX_KEYS` above the keys one isolate sees in a key's period, and keep
 * security-critical limits `scope: global`.
 */
import { type AlgorithmParams, fingerprintOf, packedPath } from "../algorithms/index.ts";
import { type PeekResult, peekState, type RefundResult } from "../protocol/store.ts";
import type { CompiledRule } from "../request/match.ts";
import { createLocalStore, type LocalCheckResult, type LocalStore } from "./local_store.ts";

interface RuleStore {
  readonly fingerprint: string;
  readonly maxKeys: number;
  readonly store: LocalStore;
  /** The parameters the store's states are kept under (a packed path may keep another algorithm's that decides the same). */
  readonly stateParams: AlgorithmParams;
}

/** The parameters the store's states are kept under: the packed path's, where the algorithm has one. */
function stateParamsOf(params: AlgorithmParams): AlgorithmParams {
  return (packedPath(params)?.stateParams(params) as AlgorithmParams | undefined) ?? params;
}

/** One isolate's `scope: local` stores, one per rule id (see isolate.ts). */
export class LocalScope {
  private readonly stores = new Map<string, RuleStore>();
  /** The store last used for a compiled rule: the hot path, with no fingerprinting per request. */
  private readonly byCompiled = new WeakMap<CompiledRule, RuleStore>();

  /** Decide one request in this isolate; the store keeps the state. */
  check(compiled: CompiledRule, maxKeys: number, keyHash: string, cost: number, nowMs: number): LocalCheckResult {
    return this.storeFor(compiled, maxKeys).store.check(keyHash, cost, nowMs);
  }

  /** Give back an admitted request's cost; what the key looks like after it, for the RateLimit header. */
  refund(
    compiled: CompiledRule,
    maxKeys: number,
    keyHash: string,
    cost: number,
    admittedAtMs: number,
    nowMs: number,
  ): RefundResult {
    const s = this.storeFor(compiled, maxKeys);
    s.store.refund(keyHash, cost, admittedAtMs);
    const peek = peekState(s.stateParams, s.store.peek(keyHash), nowMs);
    return { remaining: peek.remaining, resetAfterMs: peek.resetAfterMs };
  }

  /** A cost-1 request's view of the key, nothing charged (the admin API). */
  peek(compiled: CompiledRule, maxKeys: number, keyHash: string, nowMs: number): PeekResult {
    const s = this.storeFor(compiled, maxKeys);
    return peekState(s.stateParams, s.store.peek(keyHash), nowMs);
  }

  /** Forget a key in this isolate (the admin API's reset); `true` if it was there. */
  delete(compiled: CompiledRule, maxKeys: number, keyHash: string): boolean {
    return this.storeFor(compiled, maxKeys).store.delete(keyHash);
  }

  /** Keys, bytes and evictions across this isolate's local stores (the admin API's stats). */
  stats(): { readonly keys: number; readonly bytes: number; readonly evictions: number } {
    let keys = 0;
    let bytes = 0;
    let evictions = 0;
    for (const { store } of this.stores.values()) {
      keys += store.size;
      bytes += store.bytes;
      evictions += store.evictions;
    }
    return { keys, bytes, evictions };
  }

  private storeFor(compiled: CompiledRule, maxKeys: number): RuleStore {
    const known = this.byCompiled.get(compiled);
    if (known !== undefined && known.maxKeys === maxKeys && this.stores.get(compiled.rule.id) === known) return known;
    const found = this.lookupStore(compiled, maxKeys);
    this.byCompiled.set(compiled, found);
    return found;
  }

  private lookupStore(compiled: CompiledRule, maxKeys: number): RuleStore {
    const { rule, params } = compiled;
    const fingerprint = fingerprintOf(params);
    const hit = this.stores.get(rule.id);
    if (hit !== undefined && hit.fingerprint === fingerprint && hit.maxKeys === maxKeys) return hit;
    // Another rule under this id (only tests change rules inside one isolate): start empty.
    const created: RuleStore = {
      fingerprint,
      maxKeys,
      store: createLocalStore(params, maxKeys),
      stateParams: stateParamsOf(params),
    };
    this.stores.set(rule.id, created);
    return created;
  }
}
