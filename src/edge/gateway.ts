/**
 * The gateway, the Worker's HTTP front: an admin path goes to the admin API; any other request is judged on the
 * request path (judge.ts), then refused, or forwarded to the origin (origin.ts) with its RateLimit fields. An
 * upstream never receives the admin token.
 */
import type { Isolate } from "../isolate/isolate.ts";
import { logEvent } from "../isolate/metrics.ts";
import { messageOf } from "../protocol/object_call.ts";
import { adminReading, isAdminPath } from "../request/admin_path.ts";
import { problemResponse } from "../request/headers.ts";
import type { CompiledRule } from "../request/match.ts";
import { type CfFacts, regionOf } from "../request/region.ts";
import { handleAdmin, withoutAdminToken } from "./admin/admin.ts";
import type { AskContext } from "./ask.ts";
import { judgeRequest } from "./judge.ts";
import { noOrigin, originResponse, unreachableOrigin } from "./origin.ts";
import { type Env, settingsOf } from "./settings.ts";

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
    if (isAdminPath(url.pathname)) return await handleAdmin(request, url, env, settings, rules, isolate);
    // Another spelling of an admin path is never forwarded: an upstream may read it as /_sluice/... too.
    if (adminReading(url.pathname)) return problemResponse(400, ADMIN_SPELLING);
    const region = regionOf(request.cf as CfFacts | undefined);
    return await gateway(request, url, { env, settings, isolate, ctx, region }, rules);
  } catch (error) {
    logEvent("error", { event: "gateway_error", error: messageOf(error) });
    return problemResponse(500, INTERNAL_ERROR);
  }
}

export const INTERNAL_ERROR = { type: "about:blank", title: "Internal Server Error", status: 500 } as const;

const ADMIN_SPELLING = {
  type: "about:blank",
  title: "Bad Request",
  status: 400,
  detail: "This path reads as the admin API (/_sluice/...) only in another spelling; it is not forwarded.",
  error: "admin_path_spelling",
} as const;

/** The gateway: judge the request, then answer the refusal or ask the origin and add the fields to its answer. */
async function gateway(
  request: Request,
  url: URL,
  base: AskContext & { readonly ctx: ExecutionContext },
  rules: readonly CompiledRule[],
): Promise<Response> {
  const origin = base.settings.origin;
  // Checked before anything is counted: a Sluice with nowhere to send admitted requests must not spend budgets.
  if (origin.kind === "none") return noOrigin(origin.problem);
  const unreachable = unreachableOrigin(origin, url);
  if (unreachable !== null) return noOrigin(unreachable);
  const judged = await judgeRequest(request, url, base, rules);
  if (judged.judgement.kind === "refused") {
    const { status, problem, headers } = judged.judgement;
    return problemResponse(status, { ...problem }, headers);
  }
  const outgoing = withoutAdminTokenIn(request, base.settings.adminToken);
  const response = await originResponse(origin, outgoing, url, judged.forwardPath, judged.plan, judged.judgement);
  for (const [name, value] of judged.judgement.headers) response.headers.set(name, value);
  return response;
}

/** `request`, or a copy without any header that carries the admin token: an upstream never receives it. */
function withoutAdminTokenIn(request: Request, adminToken: string | null): Request {
  if (adminToken === null) return request;
  const copy = new Request(request);
  if (withoutAdminToken(copy.headers, adminToken) === 0) return request;
  logEvent("warn", { event: "admin_token_stripped" });
  return copy;
}
