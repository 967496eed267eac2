/**
 * Sluice at the edge: the Worker's entry. Its fetch composes the routers, each answering or passing on: the admin API
 * (admin/admin.ts), then the gateway (gateway.ts). Also exported: the service binding (entrypoint.ts, `RateLimiter`)
 * and the Durable Objects (src/object), on the rules and isolate state of deployed.ts.
 */
import type { Isolate } from "../isolate/isolate.ts";
import { logEvent } from "../isolate/metrics.ts";
import { messageOf } from "../protocol/object_call.ts";
import { problemResponse } from "../request/headers.ts";
import type { CompiledRule } from "../request/match.ts";
import { routeAdmin } from "./admin/admin.ts";
import { DEPLOYED_RULES, ISOLATE } from "./deployed.ts";
import { gateway } from "./gateway.ts";
import { type Env, settingsOf } from "./settings.ts";

export { SluiceDelegate } from "../object/delegate.ts";
export { SluiceLimiter } from "../object/limiter.ts";
export { RateLimiter } from "./entrypoint.ts";

export default {
  fetch(request, env, ctx): Promise<Response> {
    return handleRequest(request, env, ctx, DEPLOYED_RULES, ISOLATE);
  },
} satisfies ExportedHandler<Env>;

/** One request through the routers (tests pass their own rules and isolate); an exception is a 500, logged. */
export async function handleRequest(
  request: Request,
  env: Env,
  ctx: ExecutionContext,
  rules: readonly CompiledRule[],
  isolate: Isolate,
): Promise<Response> {
  try {
    const url = new URL(request.url);
    const settings = settingsOf(env);
    const admin = await routeAdmin(request, url, env, settings, rules, isolate);
    if (admin !== null) return admin;
    return await gateway(request, url, { env, settings, isolate, ctx }, rules);
  } catch (error) {
    logEvent("error", { event: "gateway_error", error: messageOf(error) });
    return problemResponse(500, INTERNAL_ERROR);
  }
}

const INTERNAL_ERROR = { type: "about:blank", title: "Internal Server Error", status: 500 } as const;
