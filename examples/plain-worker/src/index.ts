/**
 * A plain Worker on Sluice. `/native/...` is code written for Cloudflare's Rate Limiting binding, unchanged: only
 * wrangler.toml changed. Everything else is behind `withSluice`: every rule of Sluice's rule set that matches the
 * request applies, and a refused request gets the gateway's 429 (problem+json, Retry-After, RateLimit fields).
 */
import { type SluiceBinding, withSluice } from "sluice/client";

export interface Env {
  /** Was `RateLimit` (the native binding); only `limit({ key })` is used, so either type fits this code. */
  readonly MY_RATE_LIMITER: Pick<SluiceBinding, "limit">;
  readonly SLUICE: SluiceBinding;
}

const api = withSluice<Env, ExecutionContext>(async (request) => {
  const { pathname } = new URL(request.url);
  return Response.json({ ok: true, path: pathname });
});

export default {
  async fetch(request, env, ctx): Promise<Response> {
    const { pathname } = new URL(request.url);
    if (pathname.startsWith("/native/")) {
      // As in Cloudflare's documentation of the Rate Limiting binding.
      const { success } = await env.MY_RATE_LIMITER.limit({ key: pathname });
      if (!success) {
        return new Response(`429 Failure – rate limit exceeded for ${pathname}`, { status: 429 });
      }
      return new Response("Success");
    }
    return api(request, env, ctx);
  },
} satisfies ExportedHandler<Env>;
