/**
 * The gateway, the Worker's HTTP front for everything but the admin API: each request is judged on the request path
 * (judge.ts), then refused, or forwarded to the origin (origin.ts) with its RateLimit fields. What the origin receives
 * is forwarding.ts: the client's request less its hop-by-hop fields and the admin token.
 */
import { problemResponse } from "../request/headers.ts";
import type { CompiledDeny, CompiledRule } from "../request/match.ts";
import { type CfFacts, regionOf } from "../request/region.ts";
import { afterOrigin } from "./after_origin.ts";
import type { AskContext } from "./ask.ts";
import { chargesAfter } from "./direct.ts";
import { outgoingRequest } from "./forwarding.ts";
import { judgeRequest } from "./judge.ts";
import { noOrigin, originResponse, unreachableOrigin } from "./origin.ts";
import { holdSlots, slotsOf } from "./slot_release.ts";

/**
 * The gateway, for any request the admin router passed on: judge it, then answer the refusal, or ask the origin and
 * add the fields to its answer.
 */
export async function gateway(
  request: Request,
  url: URL,
  context: Omit<AskContext, "region"> & { readonly ctx: ExecutionContext },
  rules: readonly CompiledRule[],
  denies: readonly CompiledDeny[] = [],
): Promise<Response> {
  const base = { ...context, region: regionOf(request.cf as CfFacts | undefined) };
  const origin = base.settings.origin;
  // Checked before anything is counted: a Sluice with nowhere to send admitted requests must not spend budgets.
  if (origin.kind === "none") return noOrigin(origin.problem);
  const unreachable = unreachableOrigin(origin, url);
  if (unreachable !== null) return noOrigin(unreachable);
  const judged = await judgeRequest(request, url, base, { rules, denies });
  if (judged.judgement.kind === "refused") {
    const { status, problem, headers } = judged.judgement;
    return problemResponse(status, { ...problem }, headers);
  }
  const outgoing = outgoingRequest(request, base.settings.adminToken);
  // Concurrency rules' slots are held until the response's body ends (slot_release.ts).
  const slots = holdSlots(base.env, base.ctx, slotsOf(judged.judgement.outcomes), base.isolate.sleep);
  const response = await slots.during(
    originResponse(origin, outgoing, url, judged.forwardPath, judged.plan, judged.judgement),
  );
  try {
    // The origin answered: what needs its answer runs after the response has gone (after_origin.ts).
    afterOrigin(base.ctx, response, [chargesAfter(base, judged.judgement.outcomes)]);
    for (const [name, value] of judged.judgement.headers) response.headers.set(name, value);
  } catch (error) {
    // Never a slot renewed for a request that is gone.
    slots.abandon();
    throw error;
  }
  return slots.after(response);
}
