/**
 * After the origin answered an admitted request: work that needs the answer (its status and header fields; the body
 * may still be streaming to the client) and must not delay it. The gateway calls `afterOrigin` once per admitted
 * request with the hooks that apply; each returns its background work, kept alive by `ctx.waitUntil` after the
 * response has gone, or `null` for none. A hook never reads the body, and a failing one is logged, never thrown.
 * One hook so far: the charges of rules that count by the response (direct.ts `chargesAfter`).
 */
import { logEvent } from "../isolate/metrics.ts";
import { messageOf } from "../protocol/object_call.ts";

/** What the origin answered, as a hook sees it. */
export interface OriginAnswer {
  readonly status: number;
  readonly headers: Headers;
}

/** One piece of after-response work: its promise, or `null` when it has nothing to do for this answer. */
export type AfterOrigin = (answer: OriginAnswer) => Promise<unknown> | null;

/** Run each hook on the origin's answer and keep its work alive past the response. */
export function afterOrigin(
  ctx: Pick<ExecutionContext, "waitUntil">,
  answer: OriginAnswer,
  hooks: readonly (AfterOrigin | null)[],
): void {
  for (const hook of hooks) {
    if (hook === null) continue;
    let work: Promise<unknown> | null;
    try {
      work = hook(answer);
    } catch (error) {
      logEvent("error", { event: "after_origin_failed", error: messageOf(error) });
      continue;
    }
    if (work === null) continue;
    ctx.waitUntil(
      work.catch((error: unknown) => logEvent("error", { event: "after_origin_failed", error: messageOf(error) })),
    );
  }
}
