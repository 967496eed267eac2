/**
 * A test of whether a value is empty or has one, where the source system reads a value not sent and one sent empty
 * alike: NGINX (both are `""`, its map's `""` entry takes both) and AWS WAF (a size over 0 fails both). Not a `present`
 * test, which counts a value sent empty as sent: `{ matches: "^$", missing_as_empty: true }`, with `not` for "has one".
 */
import type { MatchCondition } from "../rules/types.ts";

export function emptyTest(source: MatchCondition["in"], name: string, empty: boolean): MatchCondition {
  return { in: source, name, test: "matches", value: "^$", ignoreCase: false, not: !empty, missingAsEmpty: true };
}
