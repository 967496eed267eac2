/**
 * `sluice compile`: validate the rules and write them, resolved, as a TypeScript module the Worker imports. The
 * Worker thus carries no YAML parser or validator, and invalid rules stop `npm start`, `npm test` and
 * `wrangler deploy` (its build command runs this) with the validator's messages.
 *
 * While rules are being watched (`npm start` compiles on every change of rules/; a bare `wrangler dev` runs the build
 * command with `WRANGLER_COMMAND=dev`), or with `--watching`, it behaves as a reloading server should: rules that
 * became invalid leave the last valid module in place, so the Worker keeps serving it, and the messages say why
 * without a stack trace (exit status 0: wrangler would hold every request until a build succeeds).
 *
 * Under `wrangler deploy` (its build command, `WRANGLER_COMMAND=deploy`) it refuses a rule file marked as the demo's
 * (`rules/shiplane.yaml`, for `npm start` and the README): shipped by mistake, the demo would limit every caller of
 * the user's API by Shiplane's plans and routes.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { systemClock } from "../isolate/time.ts";
import { loadRules } from "../rules/load.ts";
import { commandArgs, EXIT_CODES, inputError, rulePaths } from "./args.ts";
import type { Io } from "./io.ts";
import { problemCount, writeSummaries, writeWarnings } from "./validate.ts";

/** A line of a rule file's opening comment that marks it as a demo, not rules to deploy (rules/shiplane.yaml). */
export const DEMO_MARKER = "# sluice: demo";

/** Whether `yaml`'s opening comment lines (before anything else) hold the demo marker. */
export function isDemo(yaml: string): boolean {
  for (const line of yaml.split("\n")) {
    if (line.trim() === DEMO_MARKER) return true;
    if (!line.startsWith("#") && line.trim() !== "") return false;
  }
  return false;
}

/**
 * The loaded rule files that are marked as the demo's, when this compile is a deploy's build step that has not been
 * told to ship the demo (SLUICE_DEPLOY_DEMO=1): a message per file, else none.
 */
export function demoRefusals(files: readonly string[], env: NodeJS.ProcessEnv): string[] {
  const command = env.WRANGLER_COMMAND;
  if (command === undefined || command === "dev" || env.SLUICE_DEPLOY_DEMO === "1") return [];
  return files
    .filter((file) => isDemo(readFileSync(file, "utf8")))
    .map(
      (file) =>
        `${file}: the demo API's rules (marked "${DEMO_MARKER}"), not yours: deployed, they would limit every caller ` +
        `of your API by the demo's plans and routes. Put your rules in rules/ and delete ${file}, or remove its ` +
        `line "${DEMO_MARKER}" to deploy it as your own (SLUICE_DEPLOY_DEMO=1 deploys it as it is).`,
    );
}

const HELP = `Usage: sluice compile [--rules PATH]... [--out FILE] [--watching]

Validates the rules (default: rules/) and writes them resolved to FILE (default: src/generated/rules.ts), stamped
with a rules version: kept while the rules are unchanged, else the build time in ms (at least the last one + 1),
or SLUICE_RULES_VERSION when set. A key's Durable Object obeys the newest version it has seen.
Exits 1 with every problem if the rules are invalid, writing nothing.
  --watching   as under wrangler dev (WRANGLER_COMMAND=dev): invalid rules keep the last valid FILE (exit 0 when
               there is one)
As a deploy's build step (WRANGLER_COMMAND=deploy), a rule file whose opening comment has the line "${DEMO_MARKER}"
(the demo, rules/shiplane.yaml) stops the deploy, unless SLUICE_DEPLOY_DEMO=1.
${EXIT_CODES}`;

/**
 * The rules version to stamp: `given` (SLUICE_RULES_VERSION) when set; else the previous module's when its rules are
 * the same (so an unchanged build writes nothing, and `wrangler dev` does not rebuild in a loop); else the build time,
 * never below the previous version + 1. A message when `given` is not a safe non-negative integer.
 */
export function rulesVersion(
  previous: string,
  rulesText: string,
  given: string | undefined,
  nowMs: number,
): number | string {
  if (given !== undefined && given !== "") {
    const n = Number(given);
    if (!/^\d+$/.test(given) || !Number.isSafeInteger(n)) {
      return `sluice compile: SLUICE_RULES_VERSION must be a non-negative integer, got ${JSON.stringify(given)}`;
    }
    return n;
  }
  const before = /export const RULES_VERSION = (\d+);/.exec(previous);
  const last = before === null ? null : Number(before[1]);
  if (last !== null && previous.endsWith(rulesText)) return last;
  return Math.max(nowMs, (last ?? 0) + 1);
}

export async function runCompile(args: string[], io: Io, env = process.env): Promise<number> {
  const cmd = { name: "compile", help: HELP, stdout: io.stdout, stderr: io.stderr };
  const parsed = commandArgs(cmd, args, {
    values: ["rules", "out"],
    repeated: ["rules"],
    booleans: ["watching"],
    positionals: false,
  });
  if (typeof parsed === "number") return parsed;
  const paths = rulePaths(parsed);
  const out = parsed.values.get("out")?.[0] ?? "src/generated/rules.ts";
  const watching = parsed.booleans.has("watching") || env.WRANGLER_COMMAND === "dev";
  const loaded = loadRules(paths);
  writeWarnings(io.stderr, loaded.warnings);
  if (loaded.errors.length > 0) {
    if (watching && existsSync(out)) {
      io.stderr.write(
        `sluice: the rules are invalid; still serving the last valid ones (${out}) until they are fixed:\n${loaded.errors.join("\n")}\n`,
      );
      return 0;
    }
    return inputError(io, [...loaded.errors, problemCount(loaded.errors.length, "; nothing written")]);
  }
  const demo = demoRefusals([...new Set([...loaded.rules, ...loaded.denies].map((rule) => rule.file))], env);
  if (demo.length > 0) return inputError(io, [...demo, "sluice compile: nothing written"]);
  const rulesText =
    `export const RULES: readonly ResolvedRule[] = ${JSON.stringify(loaded.rules, null, 2)};\n\n` +
    "/** The deny rules (src/rules/deny.ts): each refuses every request it matches, before any limiter is asked. */\n" +
    `export const DENY_RULES: readonly DenyRule[] = ${JSON.stringify(loaded.denies, null, 2)};\n`;
  try {
    mkdirSync(dirname(out), { recursive: true });
    const previous = existsSync(out) ? readFileSync(out, "utf8") : "";
    const version = rulesVersion(previous, rulesText, env.SLUICE_RULES_VERSION, systemClock());
    if (typeof version === "string") return inputError(io, [version]);
    const text = `// Generated by \`sluice compile\` from ${paths.join(", ")}. Do not edit: edit the YAML and rebuild.
import type { DenyRule, ResolvedRule } from "../rules/types.ts";

/** Monotonic: the Durable Objects obey the newest version they have seen (src/protocol/store.ts \`ruleFor\`). */
export const RULES_VERSION = ${version};

${rulesText}`;
    // Rewrite only on change, so `wrangler dev` does not rebuild in a loop.
    if (previous !== text) writeFileSync(out, text);
  } catch (err) {
    return inputError(io, [`sluice compile: cannot write ${out}: ${(err as Error).message}`]);
  }
  writeSummaries(io.stdout, loaded);
  io.stdout.write(`wrote ${out}\n`);
  return 0;
}
