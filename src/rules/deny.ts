/**
 * Deny rules: `deny: true` refuses every request the rule's `match` holds for, at the edge, before any limiter is
 * asked, and counts nothing: a blocklist, as Envoy's `requests_per_unit: 0`, Cloudflare's block action or NGINX's
 * `deny` say it. Such a rule has an id, a match (without `identity`: it counts no one) and three fields of the field
 * table, read by the same readers: `mode`, `status` (default 403: waiting does not help) and `description`.
 */
import { RULE_FIELDS } from "./fields.ts";
import { ALL_PARAM_KEYS } from "./params.ts";
import { describe, type Raw } from "./raw.ts";
import { type RuleErrors, unknownKey } from "./read.ts";
import type { DenyRule } from "./types.ts";

/** A deny rule's status when it names none: no later retry is admitted, so not 429. */
export const DENY_STATUS = 403;

/** The keys a deny rule takes. */
const DENY_KEYS = ["id", "deny", "match", "mode", "status", "description"] as const;

/** What a deny rule reads of the field table. */
const READ = ["mode", "status", "description"] as const;

/** A deny rule's own fields (all but its id and match), or `null` after reporting its problems into `e`. */
export function resolveDenyFields(
  raw: Map<string, Raw>,
  e: RuleErrors,
): Pick<DenyRule, "mode" | "status" | "description"> | null {
  const before = e.count;
  if (raw.get("deny") !== true) {
    e.add("deny", `must be true (a rule that limits leaves deny out), got ${describe(raw.get("deny"))}`);
  }
  for (const key of raw.keys()) {
    if ((DENY_KEYS as readonly string[]).includes(key)) continue;
    const countsOrLimits =
      key === "algorithm" || ALL_PARAM_KEYS.includes(key) || RULE_FIELDS.some((f) => f.yaml === key);
    if (countsOrLimits) {
      e.add(key, `a deny rule refuses every request it matches and counts nothing, so it takes no ${key}`);
    } else {
      e.add(key, unknownKey(key, DENY_KEYS, `a deny rule takes ${DENY_KEYS.join(", ")}`, e));
    }
  }
  const fields: Record<string, unknown> = {};
  for (const name of READ) {
    const f = RULE_FIELDS.find((x) => x.yaml === name)!;
    const read = f.read as (v: Raw | undefined, cx: Parameters<typeof f.read>[1]) => unknown;
    const cx = { e, algorithm: null, capacity: null, capacityName: "", earlier: {} };
    fields[name] = raw.has(name) ? read(raw.get(name), cx) : name === "status" ? DENY_STATUS : f.fallback;
  }
  if (e.count > before || Object.values(fields).some((v) => v === undefined)) return null;
  return fields as Pick<DenyRule, "mode" | "status" | "description">;
}
