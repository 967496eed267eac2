/**
 * Sluice at the edge, the Worker's entry: its fetch (worker.ts: the admin router, then the gateway), its service
 * binding (entrypoint.ts, `RateLimiter`) and its Durable Objects (src/object), on the rules and isolate state of
 * deployed.ts. Every named export here is an entrypoint for the runtime, so helpers live in other modules.
 */
import { DEPLOYED_DENIES, DEPLOYED_RULES, ISOLATE } from "./deployed.ts";
import type { Env } from "./settings.ts";
import { handleRequest } from "./worker.ts";

export { SluiceDelegate } from "../object/delegate.ts";
export { SluiceLimiter } from "../object/limiter.ts";
export { RateLimiter } from "./entrypoint.ts";

export default {
  fetch(request, env, ctx): Promise<Response> {
    return handleRequest(request, env, ctx, DEPLOYED_RULES, ISOLATE, DEPLOYED_DENIES);
  },
} satisfies ExportedHandler<Env>;
