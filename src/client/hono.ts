/**
 * Sluice as Hono middleware (`import { sluice } from "sluice/hono"`): a refused request is answered as the gateway
 * answers it (429 problem+json with `Retry-After` and the RateLimit fields, or 400/401/503) and the handler never
 * runs; an admitted one goes on, and its response gets the RateLimit fields.
 *
 *   app.use("/api/*", sluice());                                        // every matching rule (check)
 *   app.post("/login", sluice({ rule: "login-per-ip", key: (c) => c.req.header("cf-connecting-ip") ?? "none" }));
 *
 * Hono is a peer dependency for its types only: this file imports nothing from it at run time.
 */
import type { Context, Env, MiddlewareHandler } from "hono";
import {
  bindingIn,
  DEFAULT_BINDING,
  type DecideBy,
  decide,
  keepAliveIn,
  refusalResponse,
  releaseOf,
  releasingSlots,
  withHeaders,
} from "./respond.ts";
import type { SluiceBinding } from "./types.ts";

export interface SluiceMiddlewareOptions<E extends Env> extends DecideBy<[Context<E>]> {
  /** The binding: its name in `c.env` (default `SLUICE`), or a function that finds it. */
  readonly binding?: string | ((c: Context<E>) => SluiceBinding);
}

export function sluice<E extends Env = Env>(options: SluiceMiddlewareOptions<E> = {}): MiddlewareHandler<E> {
  const find = options.binding;
  return async (c, next) => {
    const binding = typeof find === "function" ? find(c) : bindingIn(c.env, find ?? DEFAULT_BINDING);
    const result = await decide(binding, c.req.raw, options, [c]);
    if (!result.success) return refusalResponse(result);
    // The slots it holds (concurrency rules), renewed from now, go back when the response's body ends (Hono turns a
    // handler's error into a response too).
    const release = releaseOf(binding, result);
    await next();
    const keepAlive = keepAliveIn(executionContextOf(c));
    c.res = releasingSlots(binding, result, withHeaders(c.res, result.headers), keepAlive, release);
  };
}

/** The request's execution context, or `null` where Hono runs without one (`c.executionCtx` throws then). */
function executionContextOf<E extends Env>(c: Context<E>): unknown {
  try {
    return c.executionCtx;
  } catch (error) {
    if (error instanceof Error) return null;
    throw error;
  }
}
