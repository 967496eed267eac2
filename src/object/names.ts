/**
 * The one place that names a limiter's Durable Object: `<rule id>:<key hash>`. The key hash is SHA-256 hex of the
 * identity value (HMAC-SHA256 under `KEY_HASH_SECRET`, see hash.ts), never the raw key. The blocked-key cache uses the
 * same name as its entry id, so "the object" and "what this isolate knows about it" can never disagree.
 */
import type { SluiceDelegate } from "./delegate.ts";
import type { SluiceLimiter } from "./limiter.ts";

export function objectNameOf(ruleId: string, keyHash: string): string {
  return `${ruleId}:${keyHash}`;
}

/**
 * The ban index's name (limiter.ts `noteBan`): one object that lists the keys banned by `block_for`. It has no `:`, so
 * no `<rule id>:<key hash>` is ever it.
 */
export const BAN_INDEX_NAME = "sluice-ban-index";

export function banIndexStub(namespace: DurableObjectNamespace<SluiceLimiter>): DurableObjectStub<SluiceLimiter> {
  return namespace.get(namespace.idFromName(BAN_INDEX_NAME));
}

/** The stub of the object for (rule, key hash). A fresh stub each call: a reset object breaks the stub that saw it. */
export function limiterStub(
  namespace: DurableObjectNamespace<SluiceLimiter>,
  ruleId: string,
  keyHash: string,
): DurableObjectStub<SluiceLimiter> {
  return namespace.get(namespace.idFromName(objectNameOf(ruleId, keyHash)));
}

/**
 * A delegate's name: the key's object's name (hashed key, never the raw key), its region and its shard, e.g.
 * `api-per-key:3f…@weur.0`. The part after `@` is the delegate's id, which the key's object knows it by (stored as a
 * share's `holder`, share.ts).
 */
export function delegateNameOf(objectName: string, region: string | null, shard = 0): string {
  return `${objectName}@${delegateIdOf(region, shard)}`;
}

/** The id of a region's delegate (a share's stored `holder`): `weur.0` (`any.0` where the region is unknown). */
export function delegateIdOf(region: string | null, shard = 0): string {
  return `${region ?? "any"}.${shard}`;
}

/** The stub of a delegate, placed in its region (`locationHint`) when the region is known. */
export function delegateStub(
  namespace: DurableObjectNamespace<SluiceDelegate>,
  name: string,
  region: string | null,
): DurableObjectStub<SluiceDelegate> {
  const id = namespace.idFromName(name);
  return region === null ? namespace.get(id) : namespace.get(id, { locationHint: region as DurableObjectLocationHint });
}
