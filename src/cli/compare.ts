/**
 * `sluice compare`: run several rules over one trace and print what each did, one row per rule; with `--svg`, draw
 * it. The work is in `../replay/` and `../viz/` (pure); this file reads files, checks flags and writes the results.
 */
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { PassThrough } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ComparisonBuilder, KeyCounter } from "../replay/accumulate.ts";
import type { ReplayOptions } from "../replay/engine.ts";
import type { Outcome } from "../replay/outcomes.ts";
import { columnsFor, type RequestLine } from "../replay/request_trace.ts";
import { type Comparison, formatComparison } from "../replay/run.ts";
import { defaultTimeStyle, type TimeStyle } from "../replay/time.ts";
import { loadRules } from "../rules/load.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { defaultRange, renderSvg } from "../viz/svg.ts";
import {
  type CommandArgs,
  type CommandInfo,
  commandArgs,
  EXIT_CODES,
  inputError,
  rulePaths,
  unknownRuleId,
  usageError,
} from "./args.ts";
import { type Io, makeParentFolder, sayReadingStdin } from "./io.ts";
import { feedAnyTrace } from "./replay_input.ts";
import { replayOptions } from "./replay_setup.ts";
import { FileSpill } from "./spill.ts";
import { parseTime } from "./time_flag.ts";

const HELP = `Usage: sluice compare [--rules PATH]... [--trace FILE.csv] [--rule RULE_ID]... [--svg OUT.svg]
                      [--key KEY] [--from TIME] [--to TIME] [--time seconds|clock] [--title TEXT] [--accounts FILE]

Replays a trace (from --trace, or standard input) and prints one row per rule (default: every rule in the file(s),
in file order): requests admitted, denied and delayed, the most admitted in any span of the rule's length (its
window; for rate algorithms, the rate's period), and the first denial.
A trace of CSV "t_ms,key,cost" (as for "sluice simulate") runs each rule alone over every line. A request trace
(docs/rules.md, "Request traces") or an access log (NGINX, Envoy, Cloudflare) runs every request through the whole
rule set as the gateway does (routes, callers, plans, costs, composition), and each row counts the requests its rule
applied to.
  --rules PATH     a rule file or directory (repeatable; default rules/)
  --rule ID        only these rules, in this order (repeatable)
  --accounts FILE  requests: account records (plans, per-account limits), as for "sluice simulate"
  --svg OUT.svg    also draw a figure: one lane per rule, each request marked allowed, delayed or denied,
                   the state (tokens, count or estimate) of one key underneath, window boundaries, time axis
  --key KEY        the key whose state is drawn (default: the busiest key)
  --from, --to     the time range drawn (default: the whole trace, with a margin): integer ms ("2500"), a
                   duration as in rule files ("2500ms", "3s", "min") or a UTC clock time ("12:00:40")
  --time STYLE     print times as seconds ("2.5 s") or UTC clock times ("12:01:00"); default: clock time when the
                   trace starts at or after 1 h, else seconds
  --title TEXT     the figure's title (default: "sluice compare: <trace file name>")
--key naming a key that is not in the trace is a usage error, like an unknown --rule id.
Memory: about 25 bytes per key, 30 to 60 per (rule, key) whose state is not yet as good as fresh, and a few MB
per rule for the admissions inside its peak span (more go to a temporary file, 20 bytes each): a day of traffic
with 1,000,000 keys and all 11 shipped rules peaks at 393 MB, about 24 bytes per (rule, key) (BENCHMARKS.md).
Progress is shown on standard error when it is a terminal.
${EXIT_CODES}`;

/** What `sluice compare` was asked to do, its flags checked and its rules chosen. */
interface CompareRequest {
  readonly rules: ResolvedRule[];
  /** `--trace`; standard input when absent. */
  readonly tracePath: string | undefined;
  readonly svgPath: string | undefined;
  readonly key: string | undefined;
  readonly title: string | undefined;
  readonly style: TimeStyle | undefined;
  readonly range: TimeRange;
  readonly replay: ReplayOptions;
}

/** `--from` and `--to` in trace ms, each when given. */
interface TimeRange {
  from?: number;
  to?: number;
}

export async function runCompare(args: string[], io: Io): Promise<number> {
  const cmd = { name: "compare", help: HELP, stdout: io.stdout, stderr: io.stderr };
  const parsed = commandArgs(cmd, args, {
    values: ["rules", "trace", "rule", "svg", "key", "from", "to", "time", "title", "accounts"],
    repeated: ["rules", "rule"],
    positionals: false,
  });
  if (typeof parsed === "number") return parsed;
  const request = compareRequest(cmd, parsed, io);
  if (typeof request === "number") return request;
  let spooled: string | null = null;
  try {
    // The busiest key is charted unless --key names one: it takes a first pass, so standard input is spooled to a
    // temporary file for it (memory stays bounded either way).
    if (request.svgPath !== undefined && request.key === undefined && request.tracePath === undefined) {
      sayReadingStdin(io, "sluice compare");
      spooled = await spool(io.stdin);
    }
    return await compareTrace(cmd, request, spooled, io);
  } catch (err) {
    return inputError(io, [`sluice compare: ${(err as Error).message}`]);
  } finally {
    if (spooled !== null) rmSync(dirname(spooled), { recursive: true, force: true });
  }
}

/** The flags checked (usage errors first, exit 2), then the rules loaded (exit 1) and chosen (exit 2). */
function compareRequest(cmd: CommandInfo, parsed: CommandArgs, io: Io): CompareRequest | number {
  const one = (name: string) => parsed.values.get(name)?.[0];
  const rulesPaths = rulePaths(parsed);
  const style = one("time");
  if (style !== undefined && style !== "seconds" && style !== "clock") {
    return usageError(cmd, `--time must be "seconds" or "clock", got ${JSON.stringify(style)}`);
  }
  const range = timeRange(cmd, one);
  if (typeof range === "number") return range;
  const loaded = loadRules(rulesPaths);
  if (loaded.errors.length > 0) return inputError(io, loaded.errors);
  const chosen = chooseRules(loaded.rules, parsed.values.get("rule") ?? []);
  if ("error" in chosen) {
    io.stderr.write(`${rulesPaths.join(", ")}: ${chosen.error}\n`);
    return 2;
  }
  const setup = replayOptions(loaded.rules, one("accounts"));
  if ("errors" in setup) return inputError(io, setup.errors);
  return {
    // Every deny rule applies, whichever rules are charted: a request one refuses counts for no rule.
    replay: { ...setup.options, denies: loaded.denies },
    rules: chosen.rules,
    tracePath: one("trace"),
    svgPath: one("svg"),
    key: one("key"),
    title: one("title"),
    style: style as TimeStyle | undefined,
    range,
  };
}

/** `--from` and `--to`, each a time as `parseTime` reads it, `--to` after `--from`; or the usage error's status. */
function timeRange(cmd: CommandInfo, one: (name: string) => string | undefined): TimeRange | number {
  const range: TimeRange = {};
  for (const name of ["from", "to"] as const) {
    const text = one(name);
    if (text === undefined) continue;
    const t = parseTime(text);
    if ("error" in t) return usageError(cmd, `--${name} ${t.error}`);
    range[name] = t.ms;
  }
  if (range.from !== undefined && range.to !== undefined && range.to <= range.from) {
    return usageError(cmd, "--to must be after --from");
  }
  return range;
}

/** One pass over the trace (`spooled` stands in for standard input), after a first for the busiest key if needed. */
async function compareTrace(
  cmd: CommandInfo,
  request: CompareRequest,
  spooled: string | null,
  io: Io,
): Promise<number> {
  const { svgPath, key } = request;
  const tracePath = request.tracePath ?? spooled ?? undefined;
  const stateKey = svgPath === undefined ? null : (key ?? (await busiestOf(tracePath, io)));
  const spill = new FileSpill();
  try {
    return await replayAndReport(cmd, request, tracePath, stateKey, spill, io);
  } finally {
    spill.close();
  }
}

/** The replay (the peak windows' overflow in `spill`), the table printed, the figure written. */
async function replayAndReport(
  cmd: CommandInfo,
  request: CompareRequest,
  tracePath: string | undefined,
  stateKey: string | null,
  spill: FileSpill,
  io: Io,
): Promise<number> {
  const { svgPath, key, range } = request;
  const traceName = request.tracePath ?? "<stdin>";
  const builder = new ComparisonBuilder(
    request.rules,
    {
      stateKey,
      spill,
      draw: svgPath !== undefined,
      ...(range.from === undefined ? {} : { fromMs: range.from }),
      ...(range.to === undefined ? {} : { toMs: range.to }),
    },
    request.replay,
  );
  const sink = {
    keyed: (t: number, k: string, c: number, o?: Outcome | null) => builder.add(t, k, c, o ?? null),
    request: (l: RequestLine) => builder.request(l),
  };
  const fed = await feedAnyTrace(sink, tracePath, traceName, io, {
    label: "sluice compare",
    columns: columnsFor([...request.rules, ...(request.replay.denies ?? [])]),
  });
  if (fed.errors.length > 0) return inputError(io, fed.errors);
  if (key !== undefined && !builder.hasKey(key)) {
    return usageError(cmd, `no request with key ${JSON.stringify(key)} in ${traceName} (--key)`);
  }
  const comparison = builder.finish();
  const timeStyle = request.style ?? defaultTimeStyle(comparison.firstMs ?? 0);
  // Only the file's name: the report should not change with the directory it was run from.
  const shownName = request.tracePath === undefined ? traceName : basename(request.tracePath);
  io.stdout.write(formatComparison(comparison, shownName, timeStyle));
  if (svgPath === undefined) return 0;
  const svg = renderSvg(comparison, {
    title: request.title ?? `sluice compare: ${shownName}`,
    style: timeStyle,
    ...drawnRange(comparison, range),
  });
  try {
    makeParentFolder(svgPath);
    writeFileSync(svgPath, svg);
  } catch (err) {
    return inputError(io, [`sluice compare: cannot write ${svgPath}: ${(err as Error).message}`]);
  }
  return 0;
}

/** The time range drawn: `--from`/`--to` where given, else the trace's own range, kept non-empty. */
function drawnRange(comparison: Comparison, range: TimeRange): { fromMs: number; toMs: number } {
  const auto = defaultRange(comparison);
  return {
    fromMs: range.from ?? (range.to !== undefined ? Math.min(auto.fromMs, range.to - 1) : auto.fromMs),
    toMs: range.to ?? (range.from !== undefined ? Math.max(auto.toMs, range.from + 1) : auto.toMs),
  };
}

/**
 * The busiest key of the trace (a first pass; malformed lines are left for the real pass to report): by key for a
 * `t_ms,key` trace, by caller (API key, else user, else address) for requests.
 */
async function busiestOf(path: string | undefined, io: Io): Promise<string | null> {
  const counter = new KeyCounter();
  const quiet = { stdin: io.stdin, stderr: new PassThrough() };
  const sink = {
    keyed: (_t: number, key: string) => counter.add(key),
    request: (l: RequestLine) => {
      const caller = l.key ?? l.user ?? l.address;
      if (caller !== null) counter.add(caller);
    },
  };
  await feedAnyTrace(sink, path, path ?? "<stdin>", quiet, { label: "sluice compare (busiest key)" });
  return counter.busiest();
}

/** Standard input copied to a file in a new temporary directory; its path. */
async function spool(stdin: NodeJS.ReadableStream): Promise<string> {
  const path = join(mkdtempSync(join(tmpdir(), "sluice-compare-")), "trace.csv");
  await pipeline(stdin, createWriteStream(path));
  return path;
}

/** The rules named by `ids` in that order (all of them when none is named), or which id is unknown. */
export function chooseRules(
  rules: readonly ResolvedRule[],
  ids: readonly string[],
): { rules: ResolvedRule[] } | { error: string } {
  if (ids.length === 0) {
    return rules.length === 0 ? { error: "no rules to compare" } : { rules: [...rules] };
  }
  const out: ResolvedRule[] = [];
  for (const id of ids) {
    const rule = rules.find((r) => r.id === id);
    if (rule === undefined) {
      return {
        error: unknownRuleId(
          id,
          rules.map((r) => r.id),
        ),
      };
    }
    if (!out.includes(rule)) out.push(rule);
  }
  return { rules: out };
}
