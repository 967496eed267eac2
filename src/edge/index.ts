/**
 * Sluice at the edge: the Worker (gateway.ts) and its Durable Object (limiter.ts). The rules are validated at build
 * time (`sluice compile` -> src/generated/rules.ts) and compiled for matching once per isolate, here, where the
 * isolate's state (isolate.ts) is made too.
 */
import { RULES } from "../generated/rules.ts";
import { createIsolate } from "../isolate/isolate.ts";
import { compileRules } from "../request/match.ts";
import { handleRequest } from "./gateway.ts";
import type { Env } from "./settings.ts";

export { SluiceLimiter } from "../object/limiter.ts";

const COMPILED = compileRules(RULES);
/** What this isolate keeps between requests: made once, when the isolate loads this module. */
const ISOLATE = createIsolate();

export default {
  fetch(request, env, ctx): Promise<Response> {
    return handleRequest(request, env, ctx, COMPILED, ISOLATE);
  },
} satisfies ExportedHandler<Env>;
