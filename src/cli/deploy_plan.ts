/**
 * `sluice plan`: what a rule change will do before it ships. Compares the rules at `--from` (a folder, a file or a
 * git ref) with those at `--to` (default rules/), says per rule what changed and what a deploy does to its live
 * state, and with `--trace` replays both sets over a trace, streaming, counting the answers that flip.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve, sep } from "node:path";
import { formatPlan, pairRules, type Replay, ReplayBuilder, type RulePair, totalFlips } from "../replay/deploy_plan.ts";
import { defaultTimeStyle } from "../replay/time.ts";
import { loadRules } from "../rules/load.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { renderPlanSvg } from "../viz/deploy_plan_svg.ts";
import {
  type CommandArgs,
  type CommandInfo,
  commandArgs,
  EXIT_CODES,
  inputError,
  rulePaths,
  usageError,
} from "./args.ts";
import { type Io, makeParentFolder } from "./io.ts";
import { feedTrace } from "./trace.ts";

const HELP = `Usage: sluice plan --from REF|PATH [--to PATH]... [--trace FILE.csv] [--svg OUT.svg] [--max-flips N] [--top N]

Compares two rule sets and prints, per rule: added, removed, or each changed field (in rule-file terms), and what a
deploy does to the rule's live state (carried over, capped or discarded, as the core's carry-over decides: two
probe keys, one that made a single request and one at its limit, are converted and the new rule says what they
may still do).
  --from REF|PATH   the rules before: a folder or file; or a git ref (HEAD, main, v1.2), whose copy of the --to
                    paths is read with git; or REF:PATH for another path at that ref
  --to PATH         the rules after (repeatable; default rules/)
  --trace FILE.csv  replay both sets over a trace (CSV "t_ms,key,cost", as for "sluice simulate"; "-" for standard
                    input), streaming, and count the requests whose answer flips (allowed -> denied, denied ->
                    allowed) per rule and for the most affected keys. Each rule runs alone, as "sluice compare"
                    runs it; a shadow rule lets everything through; changes to match, cost and cost_by_route are
                    listed but not replayed (the trace has no routes).
  --svg OUT.svg     with --trace: draw the flips over time, one lane per replayed rule
  --max-flips N     with --trace: exit 3 when more than N answers flip (for a CI job)
  --top N           how many of the most affected keys to list (default 10)
${EXIT_CODES}3: more answers flip than --max-flips allows.
`;

/** What `sluice plan` was asked to do, its flags checked. */
interface PlanRequest {
  readonly from: string;
  readonly toPaths: string[];
  /** `--trace`, "-" for standard input. */
  readonly tracePath: string | undefined;
  readonly svgPath: string | undefined;
  readonly maxFlips: number | undefined;
  readonly top: number;
}

export async function runPlan(args: string[], io: Io): Promise<number> {
  const cmd = { name: "plan", help: HELP, stdout: io.stdout, stderr: io.stderr };
  const parsed = commandArgs(cmd, args, {
    values: ["from", "to", "rules", "trace", "svg", "max-flips", "top"],
    repeated: ["to", "rules"],
    positionals: false,
  });
  if (typeof parsed === "number") return parsed;
  const request = planRequest(cmd, parsed);
  if (typeof request === "number") return request;

  const before = loadBefore(request.from, request.toPaths);
  const after = loadRules(request.toPaths);
  const errors = [...before.errors, ...after.errors];
  if (errors.length > 0) return inputError(io, errors);
  const pairs = pairRules(before.rules, after.rules);
  const toName = request.toPaths.join(", ");

  const replay = await replayTrace(pairs, request, io);
  if (typeof replay === "number") return replay;
  const { tracePath } = request;
  const traceName = tracePath === undefined || tracePath === "-" ? "<stdin>" : basename(tracePath);
  io.stdout.write(formatPlan(pairs, before.name, toName, replay, traceName));
  if (replay === null) return 0;
  if (request.svgPath !== undefined) {
    const svg = renderPlanSvg(
      replay,
      `sluice plan: ${before.name} -> ${toName}`,
      defaultTimeStyle(replay.firstMs ?? 0),
    );
    try {
      makeParentFolder(request.svgPath);
      writeFileSync(request.svgPath, svg);
    } catch (err) {
      return inputError(io, [`sluice plan: cannot write ${request.svgPath}: ${(err as Error).message}`]);
    }
  }
  return flipGate(replay, request.maxFlips, io);
}

/** The flags checked; a usage error's exit status if one is wrong or missing. */
function planRequest(cmd: CommandInfo, parsed: CommandArgs): PlanRequest | number {
  const one = (name: string) => parsed.values.get(name)?.[0];
  const from = one("from");
  if (from === undefined) return usageError(cmd, "--from REF|PATH is required");
  const toPaths = parsed.values.has("to") ? parsed.values.get("to")! : rulePaths(parsed);
  const numbers: Record<string, number | undefined> = {};
  for (const name of ["max-flips", "top"]) {
    const text = one(name);
    if (text === undefined) continue;
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) {
      return usageError(cmd, `--${name} must be a whole number, got ${JSON.stringify(text)}`);
    }
    numbers[name] = Number(text);
  }
  const tracePath = one("trace");
  const svgPath = one("svg");
  if (tracePath === undefined && (svgPath !== undefined || numbers["max-flips"] !== undefined)) {
    return usageError(cmd, "--svg and --max-flips need --trace");
  }
  return { from, toPaths, tracePath, svgPath, maxFlips: numbers["max-flips"], top: numbers.top ?? 10 };
}

/** Both rule sets replayed over the trace, if one was given (`null` if not); exit status 1 for a bad trace. */
async function replayTrace(pairs: RulePair[], request: PlanRequest, io: Io): Promise<Replay | null | number> {
  if (request.tracePath === undefined) return null;
  const builder = new ReplayBuilder(pairs);
  const path = request.tracePath === "-" ? undefined : request.tracePath;
  const failure = await feedTrace(builder, path, path ?? "<stdin>", io.stdin, io.stderr);
  if (failure.length > 0) return inputError(io, failure);
  return builder.finish(request.top);
}

/** Exit status 3 when more answers flip than `--max-flips` allows (for a CI job), else 0. */
function flipGate(replay: Replay, maxFlips: number | undefined, io: Io): number {
  const total = totalFlips(replay);
  if (maxFlips !== undefined && total > maxFlips) {
    io.stderr.write(`sluice plan: ${total} answers flip, more than --max-flips ${maxFlips}\n`);
    return 3;
  }
  return 0;
}

type Loaded = { rules: ResolvedRule[]; errors: string[]; name: string };

/**
 * The rules before: from disk when `from` is a path; else, at git ref `from`, the `toPaths` (or at `REF:PATH`,
 * that path), copied out of git into a temporary folder and named `REF:PATH` in messages.
 */
function loadBefore(from: string, toPaths: readonly string[]): Loaded {
  if (existsSync(from)) return { ...loadRules([from]), name: from };
  const colon = from.indexOf(":");
  const ref = colon > 0 ? from.slice(0, colon) : from;
  const paths = colon > 0 ? [from.slice(colon + 1) || "."] : [...toPaths];
  const git = (args: string[]) => execFileSync("git", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  try {
    git(["rev-parse", "--verify", "--quiet", `${ref}^{commit}`]);
  } catch {
    const errors = [`--from ${JSON.stringify(from)}: cannot read it: no such file or folder, and not a git ref`];
    return { rules: [], errors, name: from };
  }
  const name = `${paths.join(", ")} at ${ref}`;
  const dir = mkdtempSync(join(tmpdir(), "sluice-plan-"));
  try {
    // Paths from the repository's top (--full-name), so `../rules` asked from a subfolder names `rules/...`; each
    // file is still checked to land inside the fresh folder before anything is written.
    const files = git(["ls-tree", "-r", "--name-only", "--full-name", ref, "--", ...paths])
      .split("\n")
      .filter((f) => /\.ya?ml$/.test(f));
    if (files.length === 0) return { rules: [], errors: [`${name}: no *.yaml or *.yml rule files there`], name };
    for (const file of files) {
      const target = resolve(dir, file);
      if (!target.startsWith(`${dir}${sep}`)) {
        return { rules: [], errors: [`${name}: ${file}: not a path inside the repository`], name };
      }
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, git(["show", `${ref}:${file}`]));
    }
    const loaded = loadRules(files.map((f) => join(dir, f)));
    // Name files as `ref:path`, not by the temporary copy.
    const rename = (text: string) => text.split(`${dir}/`).join(`${ref}:`);
    return {
      rules: loaded.rules.map((r) => ({ ...r, file: rename(r.file) })),
      errors: loaded.errors.map(rename),
      name,
    };
  } catch (err) {
    const stderr = String((err as { stderr?: unknown }).stderr ?? (err as Error).message).trim();
    return { rules: [], errors: [`${name}: git: ${stderr.split("\n")[0]}`], name };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
