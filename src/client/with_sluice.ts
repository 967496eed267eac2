/**
 * `withSluice(handler)`: a plain `fetch` handler behind Sluice. A refused request is answered as the gateway answers
 * it (429 problem+json with `Retry-After` and the RateLimit fields, or 400/401/503); an admitted one goes to the
 * handler and its response gets the RateLimit fields; the slots it holds (concurrency rules) go back when its body ends.
 *
 *   export default { fetch: withSluice(async (request, env, ctx) => new Response("ok")) };
 */
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

/** A `fetch` handler as you write it: async or not. */
export type FetchHandler<Env, Ctx> = (request: Request, env: Env, ctx: Ctx) => Response | Promise<Response>;

/** What `withSluice` returns: always async (it asks Sluice first), so a caller can `await` or `.then` it as it is. */
export type SluicedHandler<Env, Ctx> = (request: Request, env: Env, ctx: Ctx) => Promise<Response>;

export interface WithSluiceOptions<Env, Ctx> extends DecideBy<[Request, Env, Ctx]> {
  /** The binding: its name in `env` (default `SLUICE`), or a function that finds it. */
  readonly binding?: string | ((env: Env) => SluiceBinding);
}

export function withSluice<Env, Ctx>(
  handler: FetchHandler<Env, Ctx>,
  options: WithSluiceOptions<Env, Ctx> = {},
): SluicedHandler<Env, Ctx> {
  const find = options.binding;
  return async (request, env, ctx) => {
    const binding = typeof find === "function" ? find(env) : bindingIn(env, find ?? DEFAULT_BINDING);
    const result = await decide(binding, request, options, [request, env, ctx]);
    if (!result.success) return refusalResponse(result);
    // The request's slots (concurrency rules), renewed from now until they go back.
    const release = releaseOf(binding, result);
    let response: Response;
    try {
      response = await handler(request, env, ctx);
    } catch (error) {
      // The handler failed: the slots go back now.
      await release?.();
      throw error;
    }
    return releasingSlots(binding, result, withHeaders(response, result.headers), keepAliveIn(ctx), release);
  };
}
