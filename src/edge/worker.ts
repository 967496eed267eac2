/**
 * The Worker's fetch: the routers composed, each answering or passing on (admin/admin.ts's `routeAdmin`, then the
 * gateway, gateway.ts). Rules and isolate state come in (deployed.ts in the Worker, the tests' own in tests).
 */
import type { Isolate } from "../isolate/isolate.ts";
import { logEvent } from "../isolate/metrics.ts";
import { messageOf } from "../protocol/object_call.ts";
import { problemResponse } from "../request/headers.ts";
import type { CompiledDeny, CompiledRule } from "../request/match.ts";
import { routeAdmin } from "./admin/admin.ts";
import { gateway } from "./gateway.ts";
import { type Env, settingsOf } from "./settings.ts";

/** One request through the routers; an exception is a 500, logged. */
export async function handleRequest(
  request: Request,
  env: Env,
  ctx: ExecutionContext,
  rules: readonly CompiledRule[],
  isolate: Isolate,
  denies: readonly CompiledDeny[] = [],
): Promise<Response> {
  try {
    const url = new URL(request.url);
    const settings = settingsOf(env);
    const admin = await routeAdmin(request, url, env, settings, rules, isolate, denies);
    if (admin !== null) return admin;
    return await gateway(request, url, { env, settings, isolate, ctx }, rules, denies);
  } catch (error) {
    logEvent("error", { event: "gateway_error", error: messageOf(error) });
    return problemResponse(500, INTERNAL_ERROR);
  }
}

const INTERNAL_ERROR = { type: "about:blank", title: "Internal Server Error", status: 500 } as const;
