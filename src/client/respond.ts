/**
 * Answering a decision the way the gateway does, for the middleware (hono.ts) and the wrapper (with_sluice.ts): a
 * refusal is its problem+json body with its status and header fields; an admitted request's response gets the
 * fields added.
 */
import { clientSleep } from "./time.ts";
import type { CheckResult, LimitOptions, SluiceBinding } from "./types.ts";
import { requestForCheck } from "./types.ts";

/** The binding's default name in the consumer's env. */
export const DEFAULT_BINDING = "SLUICE";

/** The gateway's answer to a refused request: `status`, `application/problem+json`, the decision's header fields. */
export function refusalResponse(result: CheckResult): Response {
  const headers = new Headers(result.headers);
  headers.set("Content-Type", "application/problem+json");
  headers.set("Cache-Control", "no-store");
  return new Response(JSON.stringify(result.problem), { status: result.status, headers });
}

/** `response` with the decision's header fields set (re-wrapped when its headers are immutable, as a fetch's are). */
export function withHeaders(response: Response, headers: Readonly<Record<string, string>>): Response {
  const names = Object.keys(headers);
  if (names.length === 0) return response;
  let out = response;
  try {
    for (const name of names) out.headers.set(name, headers[name]!);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    out = new Response(response.body, response);
    for (const name of names) out.headers.set(name, headers[name]!);
  }
  return out;
}

/** The binding named `name` in `env`, or a `TypeError` that says how to add it. */
export function bindingIn(env: unknown, name: string): SluiceBinding {
  const binding = typeof env === "object" && env !== null ? (env as Record<string, unknown>)[name] : undefined;
  if (typeof binding !== "object" && typeof binding !== "function")
    throw new TypeError(
      `Sluice: env.${name} is not bound; add to wrangler.toml: [[services]] binding = "${name}" service = "sluice" entrypoint = "RateLimiter"`,
    );
  return binding as SluiceBinding;
}

/** How a middleware decides: every matching rule (`check`, the default), or one rule by a key of its choosing. */
export interface DecideBy<Args extends unknown[]> {
  /** Count by this key against one rule (`limit`) instead of applying every matching rule to the request (`check`). */
  readonly key?: (...args: Args) => string | Promise<string>;
  /** With `key`: the rule (default: the binding's `props.rule`). */
  readonly rule?: string;
  /** With `key`: the cost (default: the rule's). */
  readonly cost?: number | ((...args: Args) => number);
}

/**
 * Ask the binding: `limit` when a key is configured, else `check` of the request (with the start of a body `_method`
 * may be read from, from a copy: the handler still reads all of it).
 */
export async function decide<Args extends unknown[]>(
  binding: SluiceBinding,
  request: Request,
  by: DecideBy<Args>,
  args: Args,
): Promise<CheckResult> {
  if (by.key === undefined) return binding.check(await requestForCheck(request));
  const options: { -readonly [K in keyof LimitOptions]: LimitOptions[K] } = { key: await by.key(...args) };
  if (by.rule !== undefined) options.rule = by.rule;
  if (by.cost !== undefined) options.cost = typeof by.cost === "function" ? by.cost(...args) : by.cost;
  return binding.limit(options);
}

/**
 * The handler's `response`, with the request's slots (concurrency rules, `result.slots`) given back once its body
 * ends: read to the end, cancelled (the client went away) or failed; at once without a body. Until then they are
 * renewed every `result.renewEveryMs` by `release`'s timer: make it (`releaseOf`) before the handler runs, so that
 * a handler or a body that outlasts `slot_ttl` keeps its slots. `keepAlive` is the request's `waitUntil`. A failed release is logged: the slot then comes back after its rule's `slot_ttl`.
 */
export function releasingSlots(
  binding: SluiceBinding,
  result: CheckResult,
  response: Response,
  keepAlive: (work: Promise<unknown>) => void,
  release = releaseOf(binding, result),
): Response {
  if (release === null) return response;
  if (response.body === null) {
    keepAlive(release());
    return response;
  }
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  keepAlive(response.body.pipeTo(writable).then(release, release));
  return new Response(readable, response);
}

/**
 * Give back the request's slots, once; `null` when it holds none. From the call on, they are renewed every
 * `result.renewEveryMs` until the release (a timer in this Worker; `sleep` for tests).
 */
export function releaseOf(
  binding: SluiceBinding,
  result: CheckResult,
  sleep: (ms: number) => Promise<void> = clientSleep,
): (() => Promise<void>) | null {
  const slots = result.slots ?? [];
  if (slots.length === 0) return null;
  let done: Promise<void> | null = null;
  let stop: () => void = () => undefined;
  const stopped = new Promise<boolean>((resolve) => {
    stop = () => resolve(true);
  });
  const everyMs = result.renewEveryMs;
  if (everyMs !== undefined && everyMs > 0) void renewing(binding, slots, everyMs, sleep, stopped);
  return () => {
    stop();
    done ??= binding.release(slots).then(
      () => undefined,
      (error: unknown) => console.error(`Sluice: release of ${slots.length} slot(s) failed: ${String(error)}`),
    );
    return done;
  };
}

/** Renew `slots` every `everyMs` until `stopped`; a failed renewal is logged and the next one tries again. */
async function renewing(
  binding: SluiceBinding,
  slots: readonly string[],
  everyMs: number,
  sleep: (ms: number) => Promise<void>,
  stopped: Promise<boolean>,
): Promise<void> {
  while (!(await Promise.race([sleep(everyMs).then(() => false), stopped]))) {
    await binding.renew(slots).catch((error: unknown) => {
      console.error(`Sluice: renewal of ${slots.length} slot(s) failed: ${String(error)}`);
    });
  }
}

/** A `waitUntil` from a context that may have one (a Worker's `ctx`); otherwise the work just runs. */
export function keepAliveIn(ctx: unknown): (work: Promise<unknown>) => void {
  const waitUntil = typeof ctx === "object" && ctx !== null ? (ctx as { waitUntil?: unknown }).waitUntil : undefined;
  if (typeof waitUntil !== "function") return () => undefined;
  return (work) => (waitUntil as (w: Promise<unknown>) => void).call(ctx, work);
}
