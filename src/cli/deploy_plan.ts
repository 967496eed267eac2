/**
 * `sluice plan`: what a rule change will do before it ships. Compares the rules at `--from` (a folder, a file or a
 * git ref) with those at `--to` (default rules/), says per rule what changed and what a deploy does to its live
 * state, and with `--trace` replays both sets over a trace, streaming, counting the answers that flip.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve, sep } from "node:path";
import { nginxLimitStatuses, readNginxConfig } from "../migrate/nginx_conf.ts";
import { type ImportResult, rulesYaml } from "../migrate/report.ts";
import { pairRules, type RulePair } from "../replay/deploy_plan.ts";
import type { ReplayOptions } from "../replay/engine.ts";
import { type ObservedDenial, type Replay, ReplayBuilder, totalFlips } from "../replay/flips.ts";
import type { Outcome } from "../replay/outcomes.ts";
import { formatPlan } from "../replay/plan_report.ts";
import { columnsFor, type RequestLine } from "../replay/request_trace.ts";
import { defaultTimeStyle } from "../replay/time.ts";
import { loadRules } from "../rules/load.ts";
import type { DenyRule, ResolvedRule } from "../rules/types.ts";
import { parseRules } from "../rules/yaml.ts";
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
import { importFile } from "./import.ts";
import { type Io, makeParentFolder } from "./io.ts";
import { feedAnyTrace } from "./replay_input.ts";
import { replayOptions } from "./replay_setup.ts";
import { nginxLogFormat } from "./trace_from.ts";

const HELP = `Usage: sluice plan --from REF|PATH|nginx:FILE|envoy:FILE|cloudflare:FILE|aws-waf:FILE [--to PATH]...
                   [--trace FILE] [--accounts FILE] [--svg OUT.svg] [--max-flips N] [--top N] [--map KEY=MEANING]...

Compares two rule sets and prints, per rule: added, removed, or each changed field (in rule-file terms), and what a
deploy does to the rule's live state (carried over, capped or discarded, as the core's carry-over decides: two
probe keys, one that made a single request and one at its limit, are converted and the new rule says what they
may still do).
  --from REF|PATH   the rules before: a folder or file; or a git ref (HEAD, main, v1.2), whose copy of the --to
                    paths is read with git; or REF:PATH for another path at that ref
  --from nginx:FILE the limits of an nginx.conf (or envoy:FILE, an Envoy rate limit configuration; cloudflare:FILE,
                    Cloudflare's rate limiting rules as JSON; aws-waf:FILE, AWS WAF rate-based rules as JSON),
                    imported as "sluice import" does (its report goes to standard error; what it leaves
                    out is not replayed)
  --to PATH         the rules after (repeatable; default rules/)
  --trace FILE      replay both sets, streaming, and count the requests whose answer flips (allowed -> denied,
                    denied -> allowed) per rule and for the most affected keys; "-" is standard input.
                    A request trace (docs/rules.md, "Request traces") or an access log (NGINX in the nginx.conf's
                    log_format, Envoy, Cloudflare, AWS WAF) goes through each whole rule set as the gateway runs it: routes,
                    callers, plans, costs, composition; changes to match, costs and plans are replayed too.
                    A "t_ms,key,cost" trace runs each rule alone (a shadow rule lets everything through), and rules
                    limited to some routes or plans are named but left out of the totals (the trace has neither).
  --accounts FILE   account records for a request replay (plans, per-account limits), as for "sluice simulate"
  --map KEY=MEANING with --from envoy:FILE: what a descriptor key means, as for "sluice import envoy"
  --ip-set FILE     with --from aws-waf:FILE: an IP set's addresses, as for "sluice import aws-waf" (repeatable)
  --list NAME=FILE  with --from cloudflare:FILE: a custom IP list's items, as for "sluice import cloudflare"
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
    values: ["from", "to", "rules", "trace", "svg", "max-flips", "top", "accounts", "map", "ip-set", "list"],
    repeated: ["to", "rules", "map", "ip-set", "list"],
    positionals: false,
  });
  if (typeof parsed === "number") return parsed;
  const request = planRequest(cmd, parsed);
  if (typeof request === "number") return request;

  const lists = (parsed.values.get("list") ?? []).map((l) => /^([A-Za-z0-9_]+)=(.+)$/.exec(l));
  if (lists.some((l) => l === null))
    return usageError(cmd, "--list takes NAME=FILE (the name an expression gives as $NAME)");
  const files = { ipSets: parsed.values.get("ip-set") ?? [], lists: lists.map((l) => [l![1]!, l![2]!] as const) };
  const before = loadBefore(request.from, request.toPaths, { maps: parsed.values.get("map") ?? [], files }, io);
  if ("usage" in before) return usageError(cmd, before.usage);
  const after = loadRules(request.toPaths);
  const errors = [...before.errors, ...after.errors];
  if (errors.length > 0) return inputError(io, errors);
  const pairs = pairRules(before.rules, after.rules);
  const toName = request.toPaths.join(", ");
  const setup = replayOptions(after.rules, parsed.values.get("accounts")?.[0]);
  if ("errors" in setup) return inputError(io, setup.errors);

  const denies = { before: before.denies ?? [], after: after.denies };
  const replay = await replayTrace(pairs, denies, request, setup.options, before, io);
  if (typeof replay === "number") return replay;
  const { tracePath } = request;
  const traceName = tracePath === undefined || tracePath === "-" ? "<stdin>" : basename(tracePath);
  io.stdout.write(formatPlan(pairs, before.name, toName, replay, traceName, denies));
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
async function replayTrace(
  pairs: RulePair[],
  denies: { readonly before: readonly DenyRule[]; readonly after: readonly DenyRule[] },
  request: PlanRequest,
  options: ReplayOptions,
  { nginxFormat, observed }: { nginxFormat?: string | undefined; observed?: ObservedDenial | undefined },
  io: Io,
): Promise<Replay | null | number> {
  if (request.tracePath === undefined) return null;
  const builder = new ReplayBuilder(pairs, options, observed ?? null, denies);
  const path = request.tracePath === "-" ? undefined : request.tracePath;
  const sink = {
    keyed: (t: number, k: string, c: number, o?: Outcome | null) => builder.add(t, k, c, o ?? null),
    request: (l: RequestLine) => builder.request(l),
  };
  const fed = await feedAnyTrace(sink, path, path ?? "<stdin>", io, {
    label: "sluice plan",
    columns: columnsFor([...pairs.flatMap((p) => [p.before, p.after].filter((r) => r !== null)), ...denies.after]),
    ...(nginxFormat === undefined ? {} : { nginxFormat }),
  });
  if (fed.errors.length > 0) return inputError(io, fed.errors);
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

type Loaded =
  | {
      rules: ResolvedRule[];
      /** Deny rules (src/rules/deny.ts); absent: none. */
      denies?: DenyRule[];
      errors: string[];
      name: string;
      nginxFormat?: string;
      /** For `--from nginx:` and `envoy:`: whether the proxy refused a logged request, from the line's answer. */
      observed?: ObservedDenial;
    }
  | { usage: string };

/**
 * The rules before: from disk when `from` is a path; else, at git ref `from`, the `toPaths` (or at `REF:PATH`,
 * that path), copied out of git into a temporary folder and named `REF:PATH` in messages.
 */
function loadBefore(from: string, toPaths: readonly string[], given: ImportGiven, io: Io): Loaded {
  const proxy = /^(nginx|envoy|cloudflare|aws-waf):(.+)$/.exec(from);
  if (proxy !== null) return importBefore(proxy[1] as ProxyKind, proxy[2]!, given, io);
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
      denies: loaded.denies.map((r) => ({ ...r, file: rename(r.file) })),
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

type ProxyKind = "nginx" | "envoy" | "cloudflare" | "aws-waf";

/** What an import is given beside the file: Envoy's `--map`s, AWS WAF's IP sets and Cloudflare's lists. */
interface ImportGiven {
  readonly maps: readonly string[];
  readonly files: { readonly ipSets: readonly string[]; readonly lists: readonly (readonly [string, string])[] };
}

/**
 * The rules before, imported from an nginx.conf, an Envoy configuration or Cloudflare's rate limiting rules; the
 * import's report on standard error.
 */
function importBefore(kind: ProxyKind, file: string, given: ImportGiven, io: Io): Loaded {
  const imported = importFile(kind, file, given.maps, undefined, undefined, given.files);
  if ("usage" in imported) return { usage: imported.usage };
  const name = `${kind}:${file}`;
  if ("error" in imported) return { rules: [], errors: [imported.error], name };
  io.stderr.write(importSummary(kind, file, imported.result));
  const parsed = parseRules(rulesYaml(imported.result, `Imported from ${name}.`), name);
  const format = kind === "nginx" ? nginxLogFormat(file, undefined) : null;
  return {
    ...parsed,
    name,
    ...(format !== null && "format" in format ? { nginxFormat: format.format } : {}),
    observed: observedDenial(
      kind === "nginx"
        ? nginxLimitStatuses(readNginxConfig(file))
        : // Cloudflare and AWS WAF answer a rule's block with its status (the import writes AWS's 403); Envoy with 429.
          new Set([429, ...(kind === "cloudflare" || kind === "aws-waf" ? parsed.rules.map((r) => r.status) : [])]),
    ),
  };
}

/**
 * The import in one line: its full report (every approximation, with its line) is `sluice import`'s to print, once,
 * not every command's that reads the same file again.
 */
export function importSummary(kind: ProxyKind, file: string, result: ImportResult): string {
  const count = (k: string) => result.report.filter((r) => r.kind === k).length;
  const rules = `${result.rules.length} rule${result.rules.length === 1 ? "" : "s"}`;
  return (
    `${kind}:${file}: imported as ${rules}; ${count("approximate")} approximate, ${count("left out")} left out ` +
    `(\`sluice import ${kind} ${file}\` says what and why)\n`
  );
}

/**
 * A logged request was refused by the proxy's limiter when the log says so (NGINX's `$limit_req_status`, Envoy's
 * `RL` flag), else when its status is one the limiter answers with (NGINX: 503 or a `limit_req_status`; Envoy: 429).
 */
function observedDenial(statuses: ReadonlySet<number>): ObservedDenial {
  return (line) => (line.answered === null ? null : (line.answered.limited ?? statuses.has(line.answered.status)));
}
