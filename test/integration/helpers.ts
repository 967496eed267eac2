/** Shared helpers for the Workers-runtime tests. */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { vi } from "vitest";
import { sha256Hex } from "../../src/edge/hash.ts";
import { handleRequest } from "../../src/edge/worker.ts";
import { createIsolate, type Sleep } from "../../src/isolate/isolate.ts";
import { limiterStub } from "../../src/object/names.ts";
import type { Replayer } from "../../src/replay/engine.ts";
import type { RequestLine } from "../../src/replay/request_trace.ts";
import { type CompiledDeny, type CompiledRule, compileRules } from "../../src/request/match.ts";
import type { ResolvedRule } from "../../src/rules/types.ts";
import { parseRules } from "../../src/rules/yaml.ts";

/** Noon UTC, so day windows do not roll over during a test; far in the future, so no alarm fires by itself. */
export const T0 = Date.UTC(2030, 0, 15, 12, 0, 0);

/** Freeze `Date.now()` (in the Worker and the Durable Objects too) at `ms`; timers stay real. */
export function setNow(ms: number): void {
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(ms);
}

let counter = 0;
/** Tells this module instance's keys from another's (isolate-level caches may outlive a test file). */
const RUN = crypto.randomUUID().slice(0, 8);
/** A fresh API key, so tests never share limiter state. */
export function freshKey(prefix = "sk_test"): string {
  counter += 1;
  return `${prefix}_${counter}_${RUN}`;
}

/**
 * A fresh API key with an account record (plan `plan`, the default plan unless told): a verified key, counted by
 * itself. A key without a record is unverified and counted by its caller's address (caller.ts).
 */
export async function knownKey(prefix = "sk_test", plan = "free"): Promise<string> {
  const key = freshKey(prefix);
  await seedAccount(key, plan);
  return key;
}

/** A fresh client address in TEST-NET-3. */
export function freshIp(): string {
  counter += 1;
  return `203.0.113.${counter % 250}`;
}

/** Store an account record the way scripts/seed-accounts.mjs does: under the SHA-256 hex of the key. */
export async function seedAccount(key: string, plan: string): Promise<void> {
  await env.ACCOUNTS.put(await sha256Hex(key), JSON.stringify({ plan }));
}

export function req(method: string, path: string, headers: Record<string, string> = {}): Request {
  return new Request(`https://sluice.test${path}`, { method, headers });
}

export function bearer(key: string): Record<string, string> {
  return { Authorization: `Bearer ${key}` };
}

/** Resolved rules from YAML text, validated by the real parser; throws with its messages if invalid. */
export function resolvedFrom(yaml: string): ResolvedRule[] {
  const { rules, errors } = parseRules(yaml, "test.yaml");
  if (errors.length > 0) throw new Error(errors.join("\n"));
  return rules;
}

/** Rules from YAML text, compiled for the gateway. */
export function rulesFrom(yaml: string): readonly CompiledRule[] {
  return compileRules(resolvedFrom(yaml));
}

/**
 * The isolate state the gateway keeps between requests, for the tests of one file that call the gateway directly
 * (`SELF.fetch` goes through the Worker's own isolate state instead).
 */
export const isolate = createIsolate();

/**
 * A sleeper the test drives: nothing it starts ends by itself. `expire(ms)` ends every pending sleep of `ms` (every
 * pending sleep when `ms` is omitted), as if that much time had passed, and resolves once the sleepers' callers have
 * run on (a macrotask later). Give it to `createIsolate({ sleep })` so a limiter's time budget runs out exactly when
 * the test says, instead of racing a real timer.
 */
export function manualSleep(): { readonly sleep: Sleep; expire(ms?: number): Promise<void> } {
  const pending: { readonly ms: number; readonly wake: () => void }[] = [];
  return {
    sleep: (ms) => new Promise<void>((wake) => pending.push({ ms, wake })),
    async expire(ms?: number) {
      for (let i = pending.length - 1; i >= 0; i--) {
        const p = pending[i]!;
        if (ms !== undefined && p.ms !== ms) continue;
        pending.splice(i, 1);
        p.wake();
      }
      await scheduler.wait(1);
    },
  };
}

/** Run the gateway with custom rules in the Workers runtime, with the real bindings and this file's isolate state. */
export async function gatewayFetch(
  rules: readonly CompiledRule[],
  request: Request,
  denies: readonly CompiledDeny[] = [],
): Promise<Response> {
  const ctx = createExecutionContext();
  const response = await handleRequest(request, env, ctx, rules, isolate, denies);
  await waitOnExecutionContext(ctx);
  return response;
}

/** The Durable Object stub for (rule, raw key). */
export async function limiterFor(ruleId: string, rawKey: string) {
  return limiterStub(env.LIMITER, ruleId, await sha256Hex(rawKey));
}

/** The JSON bodies the gateway writes (echo or problem), loosely typed for assertions. */
export interface BodyJson {
  readonly retry_after_ms?: number;
  readonly delayed_ms?: number;
  readonly decisions: ReadonlyArray<Record<string, unknown>>;
  readonly [field: string]: unknown;
}

export function bodyOf(response: Response): Promise<BodyJson> {
  return response.json<BodyJson>();
}

/** One rule's item of a RateLimit or RateLimit-Policy field (other rules may apply to the same request too). */
export function itemOf(field: string | null, ruleId: string): string | null {
  return (field ?? "").split(", ").find((item) => item.startsWith(`"${ruleId}";`)) ?? null;
}

/** The status a replay answers a trace line with, as the gateway's: 200 admitted, a denial's status, else 400. */
/** A request trace line of a GET from `address` (nothing else known), for replays beside the gateway. */
export function getLine(tMs: number, path: string, address: string): RequestLine {
  return { tMs, method: "GET", path, address, key: null, user: null, cost: null, answered: null };
}

export function replayedStatus(replayer: Replayer, line: RequestLine): number {
  const v = replayer.request(line).verdict;
  return v.kind === "admit" ? 200 : v.kind === "deny" || v.kind === "forbidden" ? v.status : 400;
}
