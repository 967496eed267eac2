/** How the Worker reaches a key's Durable Object (the transport of ../protocol/object_call.ts). */
import type { ObjectTransport } from "../protocol/object_call.ts";
import type { CallResult, RefundResult } from "../protocol/store.ts";
import type { SluiceLimiter } from "./limiter.ts";

/** The Worker's transport: the `LIMITER` namespace, a fresh stub per attempt. */
export function durableObjectTransport(namespace: DurableObjectNamespace<SluiceLimiter>): ObjectTransport {
  const stub = (name: string) => namespace.get(namespace.idFromName(name));
  return {
    call: async (name, input) => (await stub(name).check(input)) as CallResult,
    refund: async (name, input) => (await stub(name).refund(input)) as RefundResult,
  };
}
