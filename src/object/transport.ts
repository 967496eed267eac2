/** How the Worker reaches a key's Durable Object (the transport of ../protocol/object_call.ts). */
import type { ObjectTransport } from "../protocol/object_call.ts";
import type { ReleaseResult } from "../protocol/slots.ts";
import type { CallResult, RefundResult } from "../protocol/store.ts";
import type { SluiceDelegate } from "./delegate.ts";
import type { SluiceLimiter } from "./limiter.ts";
import { delegateStub } from "./names.ts";

/** The Worker's transport: the `LIMITER` namespace, a fresh stub per attempt. */
export function durableObjectTransport(namespace: DurableObjectNamespace<SluiceLimiter>): ObjectTransport {
  const stub = (name: string) => namespace.get(namespace.idFromName(name));
  return {
    call: async (name, input) => (await stub(name).check(input)) as CallResult,
    refund: async (name, input) => (await stub(name).refund(input)) as RefundResult,
    release: async (name, input) => (await stub(name).release(input)) as ReleaseResult,
  };
}

/**
 * A delegate's transport: the `DELEGATE` namespace, placed in `region`, each call carrying the key's object's name
 * and the delegate's holder id (src/object/delegate.ts). Refunds ride with calls (`giveBack`), never alone.
 */
export function delegateTransport(
  namespace: DurableObjectNamespace<SluiceDelegate>,
  object: string,
  holder: string,
  region: string | null,
): ObjectTransport {
  return {
    call: async (name, input) =>
      (await delegateStub(namespace, name, region).check({ ...input, object, holder })) as CallResult,
    refund: async (name, input) => {
      const result = (await delegateStub(namespace, name, region).check({
        rule: input.rule,
        id: crypto.randomUUID(),
        costs: [],
        giveBack: [{ units: input.cost, atMs: input.admittedAtMs }],
        object,
        holder,
      })) as CallResult;
      return result.refunded ?? null;
    },
  };
}
