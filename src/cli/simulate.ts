/**
 * `sluice simulate`: run one rule's algorithm over a trace, in process, with no wall clock, and print one JSON
 * decision per input line. The same pure core as the Worker, so its answer is the edge's answer.
 */
import { type AlgorithmState, algorithmFor, freshAtMs } from "../algorithms/index.ts";
import { loadRules } from "../rules/load.ts";
import { capacityOf } from "../rules/types.ts";
import { commandArgs, rulePaths, usageError } from "./args.ts";
import type { Io } from "./io.ts";
import { BufferedWriter, parseTraceLineInto, readLineBatches, type TraceLineSlot } from "./trace.ts";

const HELP = `Usage: sluice simulate --rules FILE.yaml --rule RULE_ID [--trace FILE.csv]

Runs the rule over a trace of CSV lines "t_ms,key,cost" (cost optional, default 1; an optional header line first),
read from --trace or standard input, and writes one JSON decision per line to standard output:
  {"t_ms":0,"key":"a","cost":1,"allowed":true,"remaining":19,"reset_after_ms":100,"retry_after_ms":null,"delay_ms":0}
A cost above the rule's capacity prints {"t_ms":..,"key":..,"cost":..,"error":"cost_exceeds_capacity"}.
--rules PATH is a rule file or a directory of them (repeatable; default rules/).
Exit status: 0 success; 2 a usage error or an unknown rule id, AND (unlike the other commands, which exit 1 for
bad input) 2 for invalid rules, a malformed trace line or an unreadable trace: the simulator contract in
docs/rules.md fixes exit status 2 for those. Messages go to standard error, naming the file and line.
`;

/** A key's state, and its JSON spelling (escaped once, not per line). */
interface KeyEntry {
  readonly keyJson: string;
  state: AlgorithmState | null;
}

/** Above this many keys, states that are as good as fresh are swept, so memory stays bounded on long traces. */
const SWEEP_AT_KEYS = 1_000_000;

export async function runSimulate(args: string[], io: Io): Promise<number> {
  const cmd = { name: "simulate", help: HELP, stdout: io.stdout, stderr: io.stderr };
  const parsed = commandArgs(cmd, args, {
    values: ["rules", "rule", "trace"],
    repeated: ["rules"],
    positionals: false,
  });
  if (typeof parsed === "number") return parsed;
  const rulesPaths = rulePaths(parsed);
  const ruleId = parsed.values.get("rule")?.[0];
  if (ruleId === undefined) return usageError(cmd, "--rule RULE_ID is required");
  const tracePath = parsed.values.get("trace")?.[0];

  const loaded = loadRules(rulesPaths);
  if (loaded.errors.length > 0) {
    io.stderr.write(`${loaded.errors.join("\n")}\n`);
    return 2;
  }
  const rule = loaded.rules.find((r) => r.id === ruleId);
  if (rule === undefined) {
    const known = loaded.rules.map((r) => r.id).join(", ");
    io.stderr.write(
      `${rulesPaths.join(", ")}: no rule with id "${ruleId}" (rules: ${known === "" ? "none" : known})\n`,
    );
    return 2;
  }

  const traceName = tracePath ?? "<stdin>";
  const algorithm = algorithmFor(rule);
  const capacity = capacityOf(rule);
  const keys = new Map<string, KeyEntry>();
  const out = new BufferedWriter(io.stdout);
  const line: TraceLineSlot = { tMs: 0, key: "", cost: 1 };
  let lineNo = 0;
  let latestMs = 0;
  let sweepAtKeys = SWEEP_AT_KEYS;
  try {
    // Each chunk's lines are decided synchronously; only the output's back-pressure is awaited, once per chunk.
    for await (const batch of readLineBatches(tracePath, io.stdin)) {
      for (const raw of batch) {
        lineNo++;
        const parsed = parseTraceLineInto(raw, lineNo === 1, line);
        if (parsed === null) continue;
        if (parsed !== true) {
          await out.flush();
          io.stderr.write(`${traceName}:${lineNo}: ${parsed}\n`);
          return 2;
        }
        const { tMs, key, cost } = line;
        let entry = keys.get(key);
        if (entry === undefined) {
          entry = { keyJson: JSON.stringify(key), state: null };
          keys.set(key, entry);
        }
        if (cost > capacity) {
          // Impossible at any time: an error line, no state change (docs/rules.md "Costs": `cost_exceeds_capacity`).
          out.append(`{"t_ms":${tMs},"key":${entry.keyJson},"cost":${cost},"error":"cost_exceeds_capacity"}\n`);
          continue;
        }
        // `decide` without its wrapper: the cost is a checked integer in [1, capacity] here.
        const { decision: d, state } = algorithm.check(rule, entry.state, cost, tMs);
        entry.state = state;
        if (tMs > latestMs) latestMs = tMs;
        out.append(
          `{"t_ms":${tMs},"key":${entry.keyJson},"cost":${cost},"allowed":${d.allowed ? "true" : "false"},"remaining":${d.remaining},"reset_after_ms":${d.resetAfterMs},"retry_after_ms":${d.retryAfterMs === null ? "null" : d.retryAfterMs},"delay_ms":${d.delayMs}}\n`,
        );
        if (keys.size > sweepAtKeys) {
          for (const [k, e] of keys) if (e.state === null || freshAtMs(rule, e.state) <= latestMs) keys.delete(k);
          sweepAtKeys = Math.max(SWEEP_AT_KEYS, keys.size * 2);
        }
      }
      await out.drained();
    }
  } catch (err) {
    await out.flush();
    io.stderr.write(`${traceName}: cannot read trace: ${(err as Error).message}\n`);
    return 2;
  }
  await out.flush();
  return 0;
}
