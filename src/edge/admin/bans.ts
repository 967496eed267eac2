/** `GET /_sluice/bans` (admin.ts): the `block_for` bans running, from the ban index (src/object/limiter.ts `bans`). */
import type { Isolate } from "../../isolate/isolate.ts";
import { BAN_INDEX_MAX } from "../../object/ban_note.ts";
import { banIndexStub } from "../../object/names.ts";
import type { Env } from "../settings.ts";

/**
 * `/bans`: the bans the index was told of (src/edge/direct.ts `noteBan`: by the isolates that met them), running now,
 * longest first, at most `BAN_INDEX_MAX`; each ends in `ends_in_ms` on the index's clock.
 */
export async function bansOf(env: Env, isolate: Isolate) {
  const nowMs = isolate.clock();
  const bans = await banIndexStub(env.LIMITER).bans();
  return {
    max: BAN_INDEX_MAX,
    bans: bans.map((b) => ({
      rule: b.rule,
      key_hash: b.keyHash,
      until_ms: b.untilMs,
      ends_in_ms: Math.max(0, b.untilMs - nowMs),
    })),
  };
}
