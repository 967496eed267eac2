/**
 * `sluice simulate`: run one rule's algorithm over a trace, in process, with no wall clock, and print one JSON
 * decision per input line. The same pure core as the Worker, so its answer is the edge's answer.
 */
import { type AlgorithmState, algorithmFor, capacityOf, freshAtMs } from "../algorithms/index.ts";
import { loadRules } from "../rules/load.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { commandArgs, rulePaths, unknownRuleId, usageError } from "./args.ts";
import type { Io } from "./io.ts";
import { BufferedWriter, parseTraceLineInto, readLineBatches, type TraceLineSlot, TraceProblems } from "./trace.ts";

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
  const ruleId = parsed.values.get("rule")?.[0];
  if (ruleId === undefined) return usageError(cmd, "--rule RULE_ID is required");
  const rule = ruleNamed(rulePaths(parsed), ruleId, io);
  if (typeof rule === "number") return rule;
  return simulateTrace(rule, parsed.values.get("trace")?.[0], io);
}

/** The rule with id `ruleId` in the rule files, or exit status 2 (docs/rules.md fixes it for simulate) with the reason said. */
function ruleNamed(rulesPaths: string[], ruleId: string, io: Io): ResolvedRule | number {
  const loaded = loadRules(rulesPaths);
  if (loaded.errors.length > 0) {
    io.stderr.write(`${loaded.errors.join("\n")}\n`);
    return 2;
  }
  const rule = loaded.rules.find((r) => r.id === ruleId);
  if (rule === undefined) {
    io.stderr.write(
      `${rulesPaths.join(", ")}: ${unknownRuleId(
        ruleId,
        loaded.rules.map((r) => r.id),
      )}\n`,
    );
    return 2;
  }
  return rule;
}

/**
 * Every line of the trace (`tracePath`, or standard input) decided and written; exit status 2 when a line is
 * malformed: nothing is decided after the first one, but the rest is read on to report every malformed line (up to
 * `MAX_REPORTED_LINES`).
 */
async function simulateTrace(rule: ResolvedRule, tracePath: string | undefined, io: Io): Promise<number> {
  const traceName = tracePath ?? "<stdin>";
  const out = new BufferedWriter(io.stdout);
  const simulation = new Simulation(rule, out);
  const problems = new TraceProblems(traceName);
  const line: TraceLineSlot = { tMs: 0, key: "", cost: 1 };
  let lineNo = 0;
  try {
    // Each chunk's lines are decided synchronously; only the output's back-pressure is awaited, once per chunk.
    reading: for await (const batch of readLineBatches(tracePath, io.stdin)) {
      for (const raw of batch) {
        lineNo++;
        const parsed = parseTraceLineInto(raw, lineNo === 1, line);
        if (parsed === null) continue;
        if (parsed !== true) {
          if (problems.errors.length === 0) await out.flush();
          if (!problems.malformed(lineNo, parsed)) break reading;
          continue;
        }
        problems.time(lineNo, line.tMs);
        if (problems.errors.length === 0) simulation.decide(line.tMs, line.key, line.cost);
      }
      await out.drained();
    }
  } catch (err) {
    await out.flush();
    io.stderr.write(
      `${[...problems.errors, `${traceName}: cannot read trace: ${(err as Error).message}`].join("\n")}\n`,
    );
    return 2;
  }
  await out.flush();
  if (problems.errors.length > 0) {
    io.stderr.write(`${problems.errors.join("\n")}\n`);
    return 2;
  }
  const warning = problems.warning();
  if (warning !== null) io.stderr.write(`${warning}\n`);
  return 0;
}

/** One rule's state per key over a trace, each decision written as a JSON line. */
class Simulation {
  private readonly algorithm: ReturnType<typeof algorithmFor>;
  private readonly capacity: number;
  private readonly keys = new Map<string, KeyEntry>();
  private latestMs = 0;
  private sweepAtKeys = SWEEP_AT_KEYS;

  constructor(
    private readonly rule: ResolvedRule,
    private readonly out: BufferedWriter,
  ) {
    this.algorithm = algorithmFor(rule);
    this.capacity = capacityOf(rule);
  }

  /** One request, decided against its key's state, and its JSON line written. */
  decide(tMs: number, key: string, cost: number): void {
    let entry = this.keys.get(key);
    if (entry === undefined) {
      entry = { keyJson: JSON.stringify(key), state: null };
      this.keys.set(key, entry);
    }
    if (cost > this.capacity) {
      // Impossible at any time: an error line, no state change (docs/rules.md "Costs": `cost_exceeds_capacity`).
      this.out.append(`{"t_ms":${tMs},"key":${entry.keyJson},"cost":${cost},"error":"cost_exceeds_capacity"}\n`);
      return;
    }
    // `decide` without its wrapper: the cost is a checked integer in [1, capacity] here.
    const { decision: d, state } = this.algorithm.check(this.rule, entry.state, cost, tMs);
    entry.state = state;
    if (tMs > this.latestMs) this.latestMs = tMs;
    this.out.append(
      `{"t_ms":${tMs},"key":${entry.keyJson},"cost":${cost},"allowed":${d.allowed ? "true" : "false"},"remaining":${d.remaining},"reset_after_ms":${d.resetAfterMs},"retry_after_ms":${d.retryAfterMs === null ? "null" : d.retryAfterMs},"delay_ms":${d.delayMs}}\n`,
    );
    if (this.keys.size > this.sweepAtKeys) this.sweep();
  }

  /** States that are as good as fresh are dropped (a fresh state decides as no state). */
  private sweep(): void {
    for (const [k, e] of this.keys) {
      if (e.state === null || freshAtMs(this.rule, e.state) <= this.latestMs) this.keys.delete(k);
    }
    this.sweepAtKeys = Math.max(SWEEP_AT_KEYS, this.keys.size * 2);
  }
}
