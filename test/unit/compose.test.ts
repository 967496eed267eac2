/** Composition as a table: every enforce/shadow × admit/deny/fail mix, with its verdict, refunds and metric outcomes. */
import { describe, expect, it } from "vitest";
import type { Decision } from "../../src/algorithms/index.ts";
import { type Answer, type Composition, compose } from "../../src/request/compose.ts";

const admit = (delayMs = 0): Decision => ({
  allowed: true,
  remaining: 1,
  resetAfterMs: 1000,
  retryAfterMs: null,
  delayMs,
});
const denial: Decision = { allowed: false, remaining: 0, resetAfterMs: 1000, retryAfterMs: 500, delayMs: 0 };

const E = (decision: Decision): Answer => ({ mode: "enforce", kind: "decided", decision });
const S = (decision: Decision): Answer => ({ mode: "shadow", kind: "decided", decision });
const failE = (reason: "fail_open" | "fail_closed"): Answer => ({ mode: "enforce", kind: "failed", reason });
const failS = (reason: "fail_open" | "fail_closed"): Answer => ({ mode: "shadow", kind: "failed", reason });

const table: [string, Answer[], Composition][] = [
  ["no rule applies", [], { verdict: { kind: "admit", delayMs: 0 }, refund: [], refundLate: false, outcomes: [] }],
  [
    "every enforcing rule admits",
    [E(admit()), E(admit())],
    { verdict: { kind: "admit", delayMs: 0 }, refund: [], refundLate: false, outcomes: ["allowed", "allowed"] },
  ],
  [
    "one denies: the others that admitted are refunded",
    [E(admit()), E(denial), E(admit())],
    {
      verdict: { kind: "deny", denying: [1] },
      refund: [0, 2],
      refundLate: true,
      outcomes: ["refunded", "denied", "refunded"],
    },
  ],
  [
    "every denying rule is listed, in rule order",
    [E(denial), E(admit()), E(denial)],
    {
      verdict: { kind: "deny", denying: [0, 2] },
      refund: [1],
      refundLate: true,
      outcomes: ["denied", "refunded", "denied"],
    },
  ],
  [
    "a shadow denial never blocks",
    [E(admit()), S(denial)],
    { verdict: { kind: "admit", delayMs: 0 }, refund: [], refundLate: false, outcomes: ["allowed", "shadow_denied"] },
  ],
  [
    "a shadow rule that admitted a denied request is refunded too (reported as allowed)",
    [S(admit()), E(denial)],
    { verdict: { kind: "deny", denying: [1] }, refund: [0], refundLate: true, outcomes: ["allowed", "denied"] },
  ],
  [
    "fail_open is skipped",
    [failE("fail_open"), E(admit())],
    { verdict: { kind: "admit", delayMs: 0 }, refund: [], refundLate: false, outcomes: ["fail_open", "allowed"] },
  ],
  [
    "fail_closed refuses; the admissions are refunded",
    [E(admit()), failE("fail_closed")],
    {
      verdict: { kind: "fail_closed", failed: [1] },
      refund: [0],
      refundLate: true,
      outcomes: ["refunded", "fail_closed"],
    },
  ],
  [
    "a denial wins over a closed failure",
    [failE("fail_closed"), E(denial)],
    { verdict: { kind: "deny", denying: [1] }, refund: [], refundLate: true, outcomes: ["fail_closed", "denied"] },
  ],
  [
    "a shadow rule that fails closed does not refuse",
    [failS("fail_closed"), E(admit())],
    { verdict: { kind: "admit", delayMs: 0 }, refund: [], refundLate: false, outcomes: ["fail_closed", "allowed"] },
  ],
  [
    "an admitted request waits for the longest enforcing delay (shadow delays do not count)",
    [E(admit(300)), E(admit(700)), S(admit(900))],
    {
      verdict: { kind: "admit", delayMs: 700 },
      refund: [],
      refundLate: false,
      outcomes: ["allowed", "allowed", "allowed"],
    },
  ],
  [
    "a queued admission is refunded when another rule denies",
    [E(admit(300)), E(denial)],
    { verdict: { kind: "deny", denying: [1] }, refund: [0], refundLate: true, outcomes: ["refunded", "denied"] },
  ],
];

describe("compose", () => {
  it.each(table)("%s", (_name, answers, expected) => {
    expect(compose(answers)).toEqual(expected);
  });
});
