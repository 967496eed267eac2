/**
 * A slot as the service binding hands it out: `<rule id>:<key hash>:<slot id>`, a string the caller gives back to
 * `release` (the key hash is the one the rule's object is named by, never the raw key). Read strictly: a malformed
 * token, or one naming a rule that holds no slots, is a `TypeError` or `RangeError` that says what is wrong.
 */
import { slotPolicy } from "../algorithms/index.ts";
import type { CompiledRule } from "../request/match.ts";
import type { HeldSlot } from "./slot_release.ts";

const TOKEN_RE = /^([A-Za-z0-9_.-]+):([0-9a-f]{64}):([0-9]{1,16})$/;
/** The most slots one `release` call names. */
export const MAX_RELEASE_SLOTS = 100;

export function slotToken(held: HeldSlot): string {
  return `${held.rule.id}:${held.keyHash}:${held.slot}`;
}

/** The slots named by `input` (one token or a list of them); `where` names the call in messages. */
export function readSlotTokens(
  input: unknown,
  rules: readonly CompiledRule[],
  where: "Sluice release()" | "Sluice renew()" = "Sluice release()",
): HeldSlot[] {
  const tokens = typeof input === "string" ? [input] : Array.isArray(input) ? (input as unknown[]) : null;
  if (tokens === null)
    throw new TypeError(`${where}: expects a slot (a string from limit() or check()) or a list of them`);
  if (tokens.length > MAX_RELEASE_SLOTS)
    throw new RangeError(`${where}: at most ${MAX_RELEASE_SLOTS} slots at once, got ${tokens.length}`);
  return tokens.map((token) => {
    const m = typeof token === "string" ? TOKEN_RE.exec(token) : null;
    if (m === null) throw new TypeError(`${where}: not a slot from limit() or check(): ${JSON.stringify(token)}`);
    const compiled = rules.find((r) => r.rule.id === m[1]);
    if (compiled === undefined) throw new RangeError(`${where}: unknown rule ${JSON.stringify(m[1])}`);
    if (slotPolicy(compiled.params) === undefined)
      throw new RangeError(`${where}: rule ${JSON.stringify(m[1])} holds no slots (${compiled.params.algorithm})`);
    const rule = { id: compiled.rule.id, params: compiled.params, version: compiled.version };
    return { rule, keyHash: m[2]!, slot: Number(m[3]) };
  });
}
