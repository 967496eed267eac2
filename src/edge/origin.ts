/**
 * Where an admitted request goes (settings.ts, `Origin`): the upstream named by `UPSTREAM_URL`, the zone's own origin
 * (`PASS_THROUGH`, Sluice on a zone route), or the echo origin for local development. Every one receives the path
 * the request was matched under (canonical_path.ts `forwardedPath`) and the request's query.
 */

import { logEvent } from "../isolate/metrics.ts";
import { messageOf } from "../protocol/object_call.ts";
import { problemResponse } from "../request/headers.ts";
import type { AskResult } from "./ask.ts";
import type { Origin } from "./settings.ts";

/** What the echo origin describes of an admitted request. */
export interface Admission {
  readonly delayedMs: number;
  readonly outcomes: readonly AskResult[];
}

/** The origin's response to an admitted request, with mutable headers. */
export function originResponse(
  origin: Exclude<Origin, { readonly kind: "none" }>,
  request: Request,
  url: URL,
  forwardPath: string,
  plan: string | null,
  admission: Admission,
): Promise<Response> | Response {
  switch (origin.kind) {
    case "upstream": {
      const target = new URL(origin.url);
      target.pathname = origin.url.pathname.replace(/\/$/, "") + forwardPath;
      target.search = url.search;
      return forward(request, target);
    }
    case "pass_through": {
      const target = new URL(url);
      target.pathname = forwardPath;
      return forward(request, target);
    }
    case "echo":
      return echo(request, url, forwardPath, plan, admission);
    default: {
      const never: never = origin;
      return never;
    }
  }
}

/** Why `origin` cannot serve a request to `url`, or `null`: checked before the request is judged. */
export function unreachableOrigin(origin: Origin, url: URL): string | null {
  // On workers.dev there is no origin behind the Worker: the fetch would come back to Sluice itself.
  return origin.kind === "pass_through" && url.hostname.endsWith(".workers.dev") ? PASS_THROUGH_ON_WORKERS_DEV : null;
}

const PASS_THROUGH_ON_WORKERS_DEV =
  "PASS_THROUGH sends admitted requests on to the zone's origin, and a workers.dev hostname has none: deploy Sluice on a zone route (wrangler.toml `routes`), or set UPSTREAM_URL instead.";

/** 500 problem+json: the deployment has no origin for admitted requests (`problem` says what to set). */
export function noOrigin(problem: string): Response {
  logEvent("error", { event: "no_origin", error: problem });
  return problemResponse(500, { type: "about:blank", title: "Sluice Has No Origin", status: 500, detail: problem });
}

async function forward(request: Request, target: URL): Promise<Response> {
  try {
    const response = await fetch(new Request(target, request), { redirect: "manual" });
    // Re-wrapped so the headers are mutable; a WebSocket upgrade keeps its socket (the body of a 101 is none).
    if (response.webSocket !== null)
      return new Response(null, { status: 101, headers: response.headers, webSocket: response.webSocket });
    return new Response(response.body, response);
  } catch (error) {
    logEvent("error", { event: "upstream_failed", error: messageOf(error) });
    return problemResponse(502, { type: "about:blank", title: "Bad Gateway", status: 502 });
  }
}

/** The built-in origin for local development: describes the request and the decisions, never a raw key. */
function echo(request: Request, url: URL, forwardPath: string, plan: string | null, admission: Admission): Response {
  const decisions = admission.outcomes.map((o) => {
    const base = { rule: o.app.compiled.rule.id, mode: o.app.compiled.rule.mode, cost: o.app.cost, key: o.app.keyHash };
    if (o.kind === "failed") return { ...base, error: o.reason };
    const d = o.decision;
    return {
      ...base,
      allowed: d.allowed,
      remaining: d.remaining,
      reset_after_ms: d.resetAfterMs,
      retry_after_ms: d.retryAfterMs,
      delay_ms: d.delayMs,
    };
  });
  return Response.json(
    {
      echo: true,
      method: request.method,
      path: url.pathname,
      forwarded_path: forwardPath,
      query: url.search,
      plan,
      delayed_ms: admission.delayedMs,
      decisions,
    },
    { headers: { "Cache-Control": "no-store" } },
  );
}
