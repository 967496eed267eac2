/** `sluice plan`'s report as text: one block per rule (change, fields, live state), then the replay's tables. */

import { MATCH_FIELDS } from "../rules/fields.ts";
import type { DenyRule } from "../rules/types.ts";
import { changeOf, fieldChanges, type RulePair, stateFate } from "./deploy_plan.ts";
import { type Flips, type Replay, totalFlips } from "./flips.ts";
import { describeRule } from "./run.ts";

/** Why a replay shows no flips for `scope: global -> local`, and what the change may do. */
export const LOCAL_FLEET_NOTE =
  "the replay is one isolate, so it cannot show this change's effect: each isolate now counts alone, and the " +
  "fleet may admit up to the limit once per isolate (the isolates running x the limit)";

export function formatPlan(
  pairs: readonly RulePair[],
  fromName: string,
  toName: string,
  replay: Replay | null,
  traceName: string,
  denies: { readonly before: readonly DenyRule[]; readonly after: readonly DenyRule[] } = { before: [], after: [] },
): string {
  const out: string[] = [`sluice plan: ${fromName} -> ${toName}`, ""];
  out.push(...denyLines(denies));
  const counts = new Map<string, number>();
  for (const pair of pairs) {
    const change = changeOf(pair);
    counts.set(change, (counts.get(change) ?? 0) + 1);
    if (change === "unchanged") continue;
    const rule = pair.after ?? pair.before!;
    out.push(`${pair.id}: ${change} (${describeRule(rule)})`);
    if (change === "changed") {
      for (const c of fieldChanges(pair.before!, pair.after!)) out.push(`  ${c.field}: ${c.before} -> ${c.after}`);
    }
    out.push(`  live state: ${stateFate(pair).text}`);
    if (pair.before?.scope === "global" && pair.after?.scope === "local") out.push(`  fleet: ${LOCAL_FLEET_NOTE}`);
  }
  const summary = (["added", "removed", "changed", "unchanged"] as const).map((c) => `${counts.get(c) ?? 0} ${c}`);
  out.push(`${pairs.length === 0 ? "no rules" : summary.join(", ")}`, "");
  if (replay === null) return `${out.join("\n")}\n`;
  out.push(...(replay.mode === "keyed" ? keyedReplay(replay, traceName) : requestReplay(replay, traceName)));
  return `${out.join("\n")}\n`;
}

/**
 * The deny rules added, removed or changed (by id), each with what it refuses; and a count line. Nothing when none
 * changed.
 */
function denyLines({ before, after }: { readonly before: readonly DenyRule[]; readonly after: readonly DenyRule[] }) {
  if (before.length + after.length === 0) return [];
  const text = (d: DenyRule) => {
    const match = MATCH_FIELDS.filter((m) => m.yaml !== "identity")
      .map((m) => [m.yaml, m.print(d.match)] as const)
      .filter(([, v]) => v !== "any" && v !== "none");
    const what = match.length === 0 ? "every request" : match.map(([k, v]) => `match.${k} ${v}`).join("; ");
    return `deny rule, status ${d.status}${d.mode === "shadow" ? ", shadow" : ""}: ${what}`;
  };
  const same = (a: DenyRule, b: DenyRule) => text(a) === text(b);
  const out: string[] = [];
  const counts = { added: 0, removed: 0, changed: 0, unchanged: 0 };
  for (const d of after) {
    const was = before.find((b) => b.id === d.id);
    const change = was === undefined ? "added" : same(was, d) ? "unchanged" : "changed";
    counts[change]++;
    if (change === "changed") out.push(`${d.id}: changed (${text(d)}; was ${text(was!)})`);
    else if (change === "added") out.push(`${d.id}: added (${text(d)})`);
  }
  for (const d of before.filter((b) => !after.some((a) => a.id === b.id))) {
    counts.removed++;
    out.push(`${d.id}: removed (${text(d)})`);
  }
  if (out.length === 0) return [];
  const summary = Object.entries(counts).map(([c, n]) => `${n} ${c}`);
  return [...out, `deny rules: ${summary.join(", ")}`, ""];
}

function keyedReplay(replay: Replay, traceName: string): string[] {
  const out = [
    `replay of ${traceName}: ${plural(replay.requests, "request")}, ${plural(replay.keys, "key")}. Each rule alone, as \`sluice compare\` runs`,
    "it (a shadow rule lets everything through). A t_ms,key trace has no routes, plans or callers: changes to match,",
    "cost and cost_by_route are not replayed, and rules limited to some routes or plans are left out of the totals",
    '(replay a request trace for those: sluice trace from, docs/rules.md "Request traces").',
    "",
  ];
  if (replay.lanes.length === 0) {
    out.push("no rule's answers can differ: 0 flips", "");
    return out;
  }
  const rows = replay.lanes.map((l) =>
    l.notReplayed === null
      ? [l.pair.id, changeOf(l.pair), String(l.flips.allowedToDenied), String(l.flips.deniedToAllowed)]
      : [l.pair.id, changeOf(l.pair), "-", `- (not replayed: ${l.notReplayed})`],
  );
  const counted = replay.lanes.filter((l) => l.notReplayed === null).map((l) => l.flips);
  out.push(
    ...table([["rule", "change", "allowed->denied", "denied->allowed"], ...rows, ["total", "", ...sumFlips(counted)]]),
    "",
  );
  out.push(...topKeys(replay));
  return out;
}

function requestReplay(replay: Replay, traceName: string): string[] {
  const out =
    replay.observed > 0
      ? observedHeader(replay, traceName)
      : [
          `replay of ${traceName}: ${plural(replay.requests, "request")}, ${plural(replay.keys, "caller")}. Every request through each whole`,
          "rule set as the gateway runs it (routes, callers, plans, costs, composition and refunds, shadow rules). A flip is",
          "a request the gateway answers differently; each row counts the flips its rule caused (allowed->denied: it denies",
          "after; denied->allowed: it denied before), so a request two rules deny counts in both rows and once in the last.",
          "",
        ];
  if (totalFlips(replay) === 0) return [...out, "no request is answered differently: 0 flips", ""];
  const { requestFlips } = replay;
  const rows = replay.lanes.map((l) => [
    l.pair.id,
    changeOf(l.pair),
    String(l.flips.allowedToDenied),
    String(l.flips.deniedToAllowed),
  ]);
  for (const { id, flips } of replay.denyFlips)
    rows.push([id, "deny", String(flips.allowedToDenied), String(flips.deniedToAllowed)]);
  out.push(
    ...table([
      ["rule", "change", "allowed->denied", "denied->allowed"],
      ...rows,
      ["requests", "", String(requestFlips.allowedToDenied), String(requestFlips.deniedToAllowed)],
    ]),
    "",
  );
  out.push(...topKeys(replay, "caller"));
  return out;
}

/** The header of a replay whose answers before are the proxy's own, from its log. */
function observedHeader(replay: Replay, traceName: string): string[] {
  const replayed = replay.requests - replay.observed;
  return [
    `replay of ${traceName}: ${plural(replay.requests, "request")}, ${plural(replay.keys, "caller")}. Before: what the proxy answered, as`,
    `its log says (${plural(replay.observed, "request")}; a refusal by its limiter, or its limit status)${replayed > 0 ? `, and the imported rules replayed for the ${plural(replayed, "line")} without an answer` : ""}.`,
    "After: every request through the rules as the gateway runs them. A flip is a request Sluice answers otherwise",
    "than the proxy did; allowed->denied rows name the rule that denies after, denied->allowed count in the last row.",
    "",
  ];
}

function topKeys(replay: Replay, word = "key"): string[] {
  if (replay.topKeys.length === 0) return [];
  const rows = replay.topKeys.map((k) => [
    k.key,
    String(k.allowedToDenied + k.deniedToAllowed),
    String(k.allowedToDenied),
    String(k.deniedToAllowed),
  ]);
  return [`most affected ${word}s:`, ...table([[word, "flips", "allowed->denied", "denied->allowed"], ...rows], 1), ""];
}

function sumFlips(list: readonly Flips[]): [string, string] {
  const a = list.reduce((n, f) => n + f.allowedToDenied, 0);
  const d = list.reduce((n, f) => n + f.deniedToAllowed, 0);
  return [String(a), String(d)];
}

/** Columns padded; numbers (the columns from `firstNumber` on) right-aligned. */
function table(rows: string[][], firstNumber = 2): string[] {
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((r) => r[col]!.length)));
  return rows.map((r) =>
    r
      .map((cell, col) => (col >= firstNumber ? cell.padStart(widths[col]!) : cell.padEnd(widths[col]!)))
      .join("  ")
      .trimEnd(),
  );
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}
