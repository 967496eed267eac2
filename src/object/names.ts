/**
 * The one place that names a limiter's Durable Object: `<rule id>:<key hash>`. The key hash is SHA-256 hex of the
 * identity value (HMAC-SHA256 under `KEY_HASH_SECRET`, see hash.ts), never the raw key. The blocked-key cache uses the
 * same name as its entry id, so "the object" and "what this isolate knows about it" can never disagree.
 */
import type { SluiceLimiter } from "./limiter.ts";

export function objectNameOf(ruleId: string, keyHash: string): string {
  return `${ruleId}:${keyHash}`;
}

/** The stub of the object for (rule, key hash). A fresh stub each call: a reset object breaks the stub that saw it. */
export function limiterStub(
  namespace: DurableObjectNamespace<SluiceLimiter>,
  ruleId: string,
  keyHash: string,
): DurableObjectStub<SluiceLimiter> {
  return namespace.get(namespace.idFromName(objectNameOf(ruleId, keyHash)));
}
