/**
 * `sluice plan`: what a rule change will do before it ships. Compares the rules at `--from` (a folder, a file or a
 * git ref) with those at `--to` (default rules/), says per rule what changed and what a deploy does to its live
 * state, and with `--trace` replays both sets over a trace, streaming, counting the answers that flip.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { loadRules } from "../rules/load.ts";
import type { ResolvedRule } from "../rules/types.ts";
import { formatPlan, pairRules, ReplayBuilder, totalFlips } from "../viz/plan.ts";
import { renderPlanSvg } from "../viz/plan_svg.ts";
import { defaultTimeStyle } from "../viz/time.ts";
import { commandArgs, EXIT_CODES, inputError, rulePaths, usageError } from "./args.ts";
import type { Io } from "./io.ts";
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

export async function runPlan(args: string[], io: Io): Promise<number> {
  const cmd = { name: "plan", help: HELP, stdout: io.stdout, stderr: io.stderr };
  const parsed = commandArgs(cmd, args, {
    values: ["from", "to", "rules", "trace", "svg", "max-flips", "top"],
    repeated: ["to", "rules"],
    positionals: false,
  });
  if (typeof parsed === "number") return parsed;
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
  if (tracePath === undefined && (one("svg") !== undefined || numbers["max-flips"] !== undefined)) {
    return usageError(cmd, "--svg and --max-flips need --trace");
  }

  const before = loadBefore(from, toPaths);
  if ("usage" in before) return usageError(cmd, before.usage);
  const after = loadRules(toPaths);
  const errors = [...before.errors, ...after.errors];
  if (errors.length > 0) return inputError(io, errors);
  const pairs = pairRules(before.rules, after.rules);
  const toName = toPaths.join(", ");

  let replay = null;
  if (tracePath !== undefined) {
    const builder = new ReplayBuilder(pairs);
    const path = tracePath === "-" ? undefined : tracePath;
    const failure = await feedTrace(builder, path, path ?? "<stdin>", io.stdin);
    if (failure !== null) return inputError(io, [failure]);
    replay = builder.finish(numbers.top ?? 10);
  }
  const traceName = tracePath === undefined || tracePath === "-" ? "<stdin>" : basename(tracePath);
  io.stdout.write(formatPlan(pairs, before.name, toName, replay, traceName));
  if (replay === null) return 0;
  const svgPath = one("svg");
  if (svgPath !== undefined) {
    const svg = renderPlanSvg(
      replay,
      `sluice plan: ${before.name} -> ${toName}`,
      defaultTimeStyle(replay.firstMs ?? 0),
    );
    try {
      writeFileSync(svgPath, svg);
    } catch (err) {
      return inputError(io, [`sluice plan: cannot write ${svgPath}: ${(err as Error).message}`]);
    }
  }
  const max = numbers["max-flips"];
  const total = totalFlips(replay);
  if (max !== undefined && total > max) {
    io.stderr.write(`sluice plan: ${total} answers flip, more than --max-flips ${max}\n`);
    return 3;
  }
  return 0;
}

type Loaded = { rules: ResolvedRule[]; errors: string[]; name: string } | { usage: string };

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
    return { usage: `--from ${JSON.stringify(from)} is neither a file or folder nor a git ref` };
  }
  const name = `${paths.join(", ")} at ${ref}`;
  const dir = mkdtempSync(join(tmpdir(), "sluice-plan-"));
  try {
    const files = git(["ls-tree", "-r", "--name-only", ref, "--", ...paths])
      .split("\n")
      .filter((f) => /\.ya?ml$/.test(f));
    if (files.length === 0) return { rules: [], errors: [`${name}: no *.yaml or *.yml rule files there`], name };
    for (const file of files) {
      mkdirSync(dirname(join(dir, file)), { recursive: true });
      writeFileSync(join(dir, file), git(["show", `${ref}:./${file}`]));
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
