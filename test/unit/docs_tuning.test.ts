/**
 * docs/production.md's tuning table of the hot-key tier: every row's value is its constant's in the code, so the one
 * table of tunables cannot drift from what runs.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DELEGATE_BACKOFF_MS, OVERLOAD_BACKOFF_MS } from "../../src/isolate/coalesce_types.ts";
import { DELEGATE_RESET_BACKOFF_MS, DELEGATE_RESET_RETRY_MS } from "../../src/isolate/delegate_call.ts";
import { HOT_MARK_TTL_MS, MARKS_REMEMBERED } from "../../src/isolate/hot_marks.ts";
import {
  DELEGATE_BUSY_CALLS_PER_S,
  DELEGATE_CALL_MEMORY,
  DELEGATE_RENEW_BACKOFF_MS,
  DELEGATE_SHARDS,
  PENDING_RESEND_MS,
} from "../../src/protocol/delegate.ts";
import {
  DEMAND_BUCKET_MS,
  OLD_SHARE_FOR_MS,
  OLD_SHARE_MARGIN_MS,
  RENEW_LEAD_MS,
  RENEW_SLACK,
} from "../../src/protocol/delegate_demand.ts";
import { DELEGATE_KEY_TIMEOUT_MS } from "../../src/protocol/delegate_run.ts";
import { LOWS_MAX } from "../../src/protocol/late_refund.ts";
import {
  HOT_EXIT_PER_S,
  HOT_HOLD_MS,
  HOT_LEASE_PER_REQUEST,
  SHARE_HOLDERS_MAX,
  SHARE_PARTS,
  SHARE_TERM_MS,
} from "../../src/protocol/share.ts";
import { SETTLED_SLACK_PARTS, SHARE_TERM_MAX_MS } from "../../src/protocol/share_grant.ts";
import { BUSY_CALLS_PER_S } from "../../src/protocol/store.ts";
import { SLICE_EXTRA_MS, SUBLEASE_TERM_MS } from "../../src/protocol/sublease.ts";
import { AHEAD_LEAD_MS } from "../../src/protocol/window_ahead.ts";

const CONSTANTS: Record<string, number> = {
  BUSY_CALLS_PER_S,
  HOT_EXIT_PER_S,
  HOT_HOLD_MS,
  SHARE_TERM_MS,
  SHARE_TERM_MAX_MS,
  SHARE_PARTS,
  SHARE_HOLDERS_MAX,
  SETTLED_SLACK_PARTS,
  HOT_LEASE_PER_REQUEST,
  DELEGATE_SHARDS,
  DELEGATE_BUSY_CALLS_PER_S,
  DELEGATE_RENEW_BACKOFF_MS,
  DELEGATE_KEY_TIMEOUT_MS,
  RENEW_LEAD_MS,
  OLD_SHARE_FOR_MS,
  OLD_SHARE_MARGIN_MS,
  RENEW_SLACK,
  DEMAND_BUCKET_MS,
  SUBLEASE_TERM_MS,
  SLICE_EXTRA_MS,
  AHEAD_LEAD_MS,
  LOWS_MAX,
  PENDING_RESEND_MS,
  DELEGATE_CALL_MEMORY,
  DELEGATE_RESET_RETRY_MS,
  DELEGATE_RESET_BACKOFF_MS,
  DELEGATE_BACKOFF_MS,
  OVERLOAD_BACKOFF_MS,
  HOT_MARK_TTL_MS,
  MARKS_REMEMBERED,
};

describe("docs/production.md, the hot-key tier's tuning table", () => {
  const doc = readFileSync(new URL("../../docs/production.md", import.meta.url), "utf8");
  const rows = new Map([...doc.matchAll(/^\| `([A-Z_]+)` \| (\d+) \|/gm)].map((m) => [m[1]!, Number(m[2])] as const));

  it("has a row for every tunable, with the code's value", () => {
    expect(Object.fromEntries(rows)).toEqual(CONSTANTS);
  });
});
