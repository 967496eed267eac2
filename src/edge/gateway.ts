/**
 * The gateway, the Worker's HTTP front for everything but the admin API: each request is judged on the request path
 * (judge.ts), then refused, or forwarded to the origin (origin.ts) with its RateLimit fields. An upstream never
 * receives the admin token.
 */
import { logEvent } from "../isolate/metrics.ts";
import { problemResponse } from "../request/headers.ts";
import type { CompiledRule } from "../request/match.ts";
import { type CfFacts, regionOf } from "../request/region.ts";
import { withoutAdminToken } from "./admin/admin.ts";
import type { AskContext } from "./ask.ts";
import { judgeRequest } from "./judge.ts";
import { noOrigin, originResponse, unreachableOrigin } from "./origin.ts";

/**
 * The gateway, for any request the admin router passed on: judge it, then answer the refusal, or ask the origin and
 * add the fields to its answer.
 */
export async function gateway(
  request: Request,
  url: URL,
  context: Omit<AskContext, "region"> & { readonly ctx: ExecutionContext },
  rules: readonly CompiledRule[],
): Promise<Response> {
  const base = { ...context, region: regionOf(request.cf as CfFacts | undefined) };
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

/**
 * `request`, or one without any header that carries the admin token: an upstream never receives it. The headers are
 * checked on a copy of their own; only when one is stripped is a new request built, which takes over the body (the
 * original is never used again), so a body is never read or buffered here.
 */
function withoutAdminTokenIn(request: Request, adminToken: string | null): Request {
  if (adminToken === null) return request;
  const headers = new Headers(request.headers);
  if (withoutAdminToken(headers, adminToken) === 0) return request;
  logEvent("warn", { event: "admin_token_stripped" });
  return new Request(request, { headers });
}
