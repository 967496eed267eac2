/**
 * Sluice at the edge: the Worker (gateway.ts), its service binding (entrypoint.ts, `RateLimiter`) and its Durable
 * Object (limiter.ts), on the rules and isolate state of deployed.ts.
 */
import { DEPLOYED_RULES, ISOLATE } from "./deployed.ts";
import { handleRequest } from "./gateway.ts";
import type { Env } from "./settings.ts";

export { SluiceDelegate } from "../object/delegate.ts";
export { SluiceLimiter } from "../object/limiter.ts";
export { RateLimiter } from "./entrypoint.ts";

export default {
  fetch(request, env, ctx): Promise<Response> {
    return handleRequest(request, env, ctx, DEPLOYED_RULES, ISOLATE);
  },
} satisfies ExportedHandler<Env>;
