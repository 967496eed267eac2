/**
 * The service binding's calls, on the gateway's own request path (judge.ts): `check` judges a request exactly as
 * the gateway does (`judgeRequest`), `limit` enters after matching with the one rule it names (`judgeApplicable`),
 * `release` gives back the slots of concurrency rules either handed out.
 * Their inputs come from another Worker and are read strictly here: a wrong one is a `TypeError` or `RangeError`
 * whose message says what to fix, never a silent default; the limiter's own failures follow each rule's `on_error`.
 * entrypoint.ts is the thin `WorkerEntrypoint` around these functions.
 */
import {
  CHECK_BODY_MAX_BYTES,
  type CheckResult,
  type LimitOutcome,
  type LimitResult,
  MAX_LIMIT_KEY_CHARS,
  type Problem,
  type ReleaseResult,
  type RenewResult,
} from "../client/types.ts";
import type { Isolate } from "../isolate/isolate.ts";
import { logEvent } from "../isolate/metrics.ts";
import type { CompiledDeny, CompiledRule } from "../request/match.ts";
import { closest } from "../rules/closest.ts";
import { chargeOutcome, readOutcome } from "./binding_outcome.ts";
import { keyHashOf } from "./hash.ts";
import { judgeApplicable, judgeRequest } from "./judge.ts";
import type { Judgement, RequestContext } from "./judgement.ts";
import { type Env, settingsOf } from "./settings.ts";
import { releaseSlots, renewEveryMs, renewSlots, slotsOf } from "./slot_release.ts";
import { readSlotTokens, slotToken } from "./slot_tokens.ts";

/** What the binding's caller configured on its side (`props` of its `[[services]]` entry). */
export interface BindingProps {
  /** The rule `limit` uses when the call names none. */
  readonly rule?: string;
}

/** A `limit` call, read: the rule it counts against, the raw key (hashed before use) and the cost. */
export interface LimitCall {
  readonly compiled: CompiledRule;
  readonly key: string;
  readonly cost: number;
  /** What an admitted request came to, to charge (a rule that counts by the response); `null`: a check. */
  readonly outcome: LimitOutcome | null;
}

const where = "Sluice limit()";

/**
 * A binding's `props.rule` that names no rule (or no string): a mistake in the caller's wrangler.toml, the same on
 * every call. Every call rejects with it (a binding cannot answer for a rule that does not exist, and admitting or
 * refusing in silence would hide the mistake); `limitKey` logs it once per isolate as `binding_misconfigured`.
 */
export class BindingPropsError extends RangeError {
  override name = "RangeError";
}

/** Read a `limit` call strictly; throws a `TypeError` or `RangeError` that says what to fix. */
export function readLimitCall(input: unknown, props: unknown, rules: readonly CompiledRule[]): LimitCall {
  if (typeof input !== "object" || input === null)
    throw new TypeError(`${where}: expects { key, rule?, cost?, outcome? }, got ${describe(input)}`);
  const { key, rule, cost, outcome } = input as Record<string, unknown>;
  for (const name of Object.keys(input)) {
    if (name !== "key" && name !== "rule" && name !== "cost" && name !== "outcome")
      throw new TypeError(
        `${where}: unknown option ${JSON.stringify(name)}; the options are key, rule, cost and outcome`,
      );
  }
  if (typeof key !== "string") throw new TypeError(`${where}: key must be a string, got ${describe(key)}`);
  if (key.length === 0) throw new RangeError(`${where}: key must not be empty`);
  if (key.length > MAX_LIMIT_KEY_CHARS)
    throw new RangeError(`${where}: key must be at most ${MAX_LIMIT_KEY_CHARS} characters, got ${key.length}`);
  const compiled = ruleOf(rule, props, rules);
  const read = outcome === undefined ? null : readOutcome(outcome, compiled);
  if (cost === undefined) return { compiled, key, cost: compiled.rule.cost, outcome: read };
  if (typeof cost !== "number") throw new TypeError(`${where}: cost must be a number, got ${describe(cost)}`);
  if (!Number.isSafeInteger(cost) || cost < 1)
    throw new RangeError(`${where}: cost must be a positive whole number, got ${cost}`);
  return { compiled, key, cost, outcome: read };
}

function ruleOf(rule: unknown, props: unknown, rules: readonly CompiledRule[]): CompiledRule {
  const fromProps = typeof props === "object" && props !== null ? (props as BindingProps).rule : undefined;
  const named = rule ?? fromProps;
  if (named === undefined)
    throw new TypeError(
      `${where}: no rule: pass { rule } or set props = { rule = "..." } on the binding in wrangler.toml`,
    );
  if (typeof named !== "string") {
    if (rule === undefined)
      throw new BindingPropsError(`${where}: the binding's props.rule must be a rule id, got ${describe(named)}`);
    throw new TypeError(`${where}: rule must be a rule id (a string), got ${describe(named)}`);
  }
  const compiled = rules.find((r) => r.rule.id === named);
  if (compiled === undefined) {
    // The caller is another Worker, maybe another team's: a near miss is named, the rule set is not listed.
    const source = rule === undefined ? " (the binding's props.rule, in your wrangler.toml)" : "";
    const guess = closest(
      named,
      rules.map((r) => r.rule.id),
    );
    const hint = guess === null ? "" : `; did you mean ${JSON.stringify(guess)}?`;
    const message = `${where}: unknown rule ${JSON.stringify(named)}${source}${hint}`;
    throw rule === undefined ? new BindingPropsError(message) : new RangeError(message);
  }
  return compiled;
}

/** A `check` request, read: the request, its URL, and whether it stands for one whose body was not passed on. */
export interface CheckCall {
  readonly request: Request;
  readonly url: URL;
  readonly bodyWithheld: boolean;
}

/**
 * Read a `check` request strictly: an absolute http(s) URL, a method name, header fields as strings, and the start of
 * the body (at most `CHECK_BODY_MAX_BYTES`) or none.
 */
export function readCheckRequest(input: unknown): CheckCall {
  const at = "Sluice check()";
  if (input instanceof Request) {
    // A Request sent over a service binding takes its body with it: the caller's handler could no longer read it.
    if (input.body !== null)
      throw new TypeError(
        `${at}: got a Request with a body, which the binding has now taken from your handler; pass ` +
          "await requestForCheck(request) from sluice/client (its URL, method, headers and a copy of the body's start) instead",
      );
    return { request: input, url: new URL(input.url), bodyWithheld: false };
  }
  if (typeof input !== "object" || input === null)
    throw new TypeError(`${at}: expects a request { url, method?, headers? }, got ${describe(input)}`);
  const { url, method, headers, body } = input as Record<string, unknown>;
  if (typeof url !== "string") throw new TypeError(`${at}: url must be a string, got ${describe(url)}`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`${at}: url must be an absolute URL, got ${JSON.stringify(url.slice(0, 100))}`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new TypeError(`${at}: url must be http(s), got ${JSON.stringify(parsed.protocol)}`);
  if (method !== undefined && (typeof method !== "string" || !/^[A-Za-z]{1,20}$/.test(method)))
    throw new TypeError(`${at}: method must be an HTTP method name, got ${describe(method)}`);
  const fields = new Headers();
  const entries = headers === undefined ? [] : Array.isArray(headers) ? headers : Object.entries(headers as object);
  if (typeof headers !== "object" && headers !== undefined)
    throw new TypeError(`${at}: headers must be an object of strings, got ${describe(headers)}`);
  for (const entry of entries) {
    const [name, value] = Array.isArray(entry) ? entry : [undefined, undefined];
    if (typeof name !== "string" || typeof value !== "string")
      throw new TypeError(`${at}: headers must map names to strings, got ${describe(entry)}`);
    try {
      fields.append(name, value);
    } catch {
      throw new TypeError(`${at}: header ${JSON.stringify(name.slice(0, 100))} is not a valid header field`);
    }
  }
  const verb = (method ?? "GET").toUpperCase();
  const bytes = checkBody(body, verb);
  const request = new Request(parsed, { method: verb, headers: fields, ...(bytes === null ? {} : { body: bytes }) });
  return { request, url: parsed, bodyWithheld: bytes === null && verb !== "GET" && verb !== "HEAD" };
}

/** A `check` request's `body`, read strictly: bytes (or text) of at most `CHECK_BODY_MAX_BYTES`, or `null` for none. */
function checkBody(body: unknown, method: string): Uint8Array | null {
  const at = "Sluice check()";
  if (body === undefined) return null;
  let bytes: Uint8Array;
  if (typeof body === "string") bytes = new TextEncoder().encode(body);
  else if (body instanceof ArrayBuffer) bytes = new Uint8Array(body);
  else if (ArrayBuffer.isView(body)) bytes = new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  else throw new TypeError(`${at}: body must be bytes or a string, got ${describe(body)}`);
  if (method === "GET" || method === "HEAD") throw new TypeError(`${at}: a ${method} request has no body`);
  if (bytes.byteLength > CHECK_BODY_MAX_BYTES)
    throw new RangeError(
      `${at}: body must be at most the first ${CHECK_BODY_MAX_BYTES} bytes of the request's body, got ${bytes.byteLength}; requestForCheck(request) sends just those`,
    );
  return bytes;
}

function describe(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (typeof value === "object") return "an object";
  return `${typeof value} ${String(value)}`;
}

/** Everything the two calls run with: the Worker's bindings and its isolate, the deployed rules, the call's context. */
export interface BindingContext {
  readonly env: Env;
  readonly ctx: ExecutionContext;
  readonly rules: readonly CompiledRule[];
  /** The deployed deny rules: `check` refuses a request one of them matches, as the gateway does. Default none. */
  readonly denies?: readonly CompiledDeny[];
  readonly isolate: Isolate;
}

/** `check`: the gateway's judgement of one request, as data. */
export async function checkRequest(input: unknown, bx: BindingContext): Promise<CheckResult> {
  const { request, url, bodyWithheld } = readCheckRequest(input);
  const { env, ctx, rules, denies = [], isolate } = bx;
  const base = { env, settings: settingsOf(env), isolate, ctx };
  const { judgement } = await judgeRequest(request, url, base, { rules, denies }, bodyWithheld);
  return resultOf(judgement);
}

/** `limit`: one rule, one key, one cost, on the same steps as the gateway after matching. */
export async function limitKey(input: unknown, props: unknown, bx: BindingContext): Promise<LimitResult> {
  const { compiled, key, cost, outcome } = readLimitCallOnce(input, props, bx);
  const { env, ctx, isolate } = bx;
  const settings = settingsOf(env);
  const keyHash = await keyHashOf(settings.keyHashSecret, key);
  const cx: RequestContext = { env, settings, isolate, ctx, method: "RPC", plan: "none" };
  if (outcome !== null) return chargeOutcome(cx, compiled, keyHash, cost, outcome);
  isolate.stats.requests++;
  const result = resultOf(await judgeApplicable(cx, [{ compiled, keyHash, cost }]));
  const own = result.rules[0];
  const slots = result.slots;
  return {
    ...result,
    rule: compiled.rule.id,
    remaining: own?.remaining ?? null,
    resetAfterMs: own?.resetAfterMs ?? null,
    ...(slots?.[0] === undefined ? {} : { slot: slots[0] }),
  };
}

/** `readLimitCall`, with a misconfigured binding logged once per isolate (every call still gets the error). */
function readLimitCallOnce(input: unknown, props: unknown, bx: BindingContext): LimitCall {
  try {
    return readLimitCall(input, props, bx.rules);
  } catch (error) {
    if (error instanceof BindingPropsError && !bx.isolate.bindingProblems.has(error.message)) {
      bx.isolate.bindingProblems.add(error.message);
      logEvent("error", { event: "binding_misconfigured", error: error.message });
    }
    throw error;
  }
}

/** `release`: give back slots `limit` or `check` handed out (slot_tokens.ts reads them strictly). */
export async function releaseSlotsCall(input: unknown, bx: BindingContext): Promise<ReleaseResult> {
  const held = readSlotTokens(input, bx.rules);
  const results = await releaseSlots(bx.env, held, bx.isolate.sleep);
  return { released: results.reduce((n, r) => n + (r?.released ?? 0), 0) };
}

/** `renew`: start the leases of slots still held again (slot_tokens.ts reads them strictly). */
export async function renewSlotsCall(input: unknown, bx: BindingContext): Promise<RenewResult> {
  const results = await renewSlots(bx.env, readSlotTokens(input, bx.rules, "Sluice renew()"));
  return { renewed: results.reduce((n, r) => n + (r?.released ?? 0), 0) };
}

/** A judgement as the binding answers it. */
export function resultOf(judgement: Judgement): CheckResult {
  const headers: Record<string, string> = {};
  for (const [name, value] of judgement.headers) headers[name] = value;
  const rules = judgement.rules.map((r) => ({ ...r }));
  if (judgement.kind === "admitted") {
    const { delayedMs } = judgement;
    const taken = slotsOf(judgement.outcomes);
    const slots = taken.map(slotToken);
    const held = slots.length === 0 ? {} : { slots, renewEveryMs: renewEveryMs(taken) };
    return {
      success: true,
      status: 200,
      reason: null,
      headers,
      problem: null,
      delayedMs,
      retryAfterMs: null,
      rules,
      ...held,
    };
  }
  const problem = { ...judgement.problem } as Problem;
  const retryAfterMs = typeof problem.retry_after_ms === "number" ? problem.retry_after_ms : null;
  const { status, reason } = judgement;
  return { success: false, status, reason, headers, problem, delayedMs: 0, retryAfterMs, rules };
}
