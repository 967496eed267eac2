/**
 * `sluice simulate`: replay a trace in process, with no wall clock, and print one JSON line per request: for a
 * `t_ms,key,cost` trace, one rule's decision; for a request trace (or an access log), the gateway's answer and every
 * applying rule's decision. The replay engine (src/replay/engine.ts) runs the same pure core and the same request
 * steps as the Worker, so its answer is the edge's answer.
 */
import type { RuleAnswer } from "../replay/engine.ts";
import { type Replayed, Replayer } from "../replay/engine.ts";
import { columnsFor, type RequestLine } from "../replay/request_trace.ts";
import { loadRules } from "../rules/load.ts";
import type { DenyRule, ResolvedRule } from "../rules/types.ts";
import { commandArgs, rulePaths, unknownRuleId, usageError } from "./args.ts";
import type { Io } from "./io.ts";
import { feedAnyTrace, type TraceKind, type TraceSink } from "./replay_input.ts";
import { replayOptions } from "./replay_setup.ts";
import { BufferedWriter } from "./trace.ts";

const HELP = `Usage: sluice simulate [--rules PATH]... [--rule RULE_ID] [--trace FILE] [--accounts FILE.json]

Replays a trace read from --trace or standard input, and writes one JSON line per request to standard output.

A trace of CSV lines "t_ms,key,cost" (cost optional, default 1; an optional header line first) runs one rule (--rule):
  {"t_ms":0,"key":"a","cost":1,"allowed":true,"remaining":19,"reset_after_ms":100,"retry_after_ms":null,"delay_ms":0}
A cost above the rule's capacity prints {"t_ms":..,"key":..,"cost":..,"error":"cost_exceeds_capacity"}.

A request trace (docs/rules.md, "Request traces") or an access log (NGINX, Envoy, Cloudflare; see sluice trace) runs
the whole rule set (or only --rule) as the gateway does: canonical path, routes, callers and plans, costs,
composition and refunds, shadow rules. Each line says what the gateway answered and what each applying rule did:
  {"t_ms":0,"method":"GET","path":"/v1/quotes","caller":"sk_a","verdict":"denied","status":429,"delay_ms":0,
   "rules":[{"rule":"free-global","mode":"enforce","key":"sk_a","cost":1,"allowed":false,"remaining":0,...}]}
"verdict" is allowed, delayed, denied, forbidden (a deny rule, its status), unauthorized (401), too_costly (400)
or bad_request (400).
  --accounts FILE  account records (API key or its SHA-256 -> {"plan": ..., "limits": ...}, or wrangler's kv bulk
                   list): each key's plan and per-account limits. Without it, every key is verified on the default
                   plan; with it, a key without a record is unverified, as at the edge (default plan, by address).
Settings (DEFAULT_PLAN, IPV6_PREFIX, PATH_*) come from wrangler.toml's [vars] in the current folder.
--rules PATH is a rule file or a directory of them (repeatable; default rules/).
Exit status: 0 success; 2 a usage error or an unknown rule id, AND (unlike the other commands, which exit 1 for
bad input) 2 for invalid rules, a malformed trace line or an unreadable trace: the simulator contract in
docs/rules.md fixes exit status 2 for those. Messages go to standard error, naming the file and line.
`;

export async function runSimulate(args: string[], io: Io): Promise<number> {
  const cmd = { name: "simulate", help: HELP, stdout: io.stdout, stderr: io.stderr };
  const parsed = commandArgs(cmd, args, {
    values: ["rules", "rule", "trace", "accounts"],
    repeated: ["rules"],
    positionals: false,
  });
  if (typeof parsed === "number") return parsed;
  const ruleId = parsed.values.get("rule")?.[0];
  const named = rulesNamed(rulePaths(parsed), ruleId, io);
  if (typeof named === "number") return named;
  const { rules, denies } = named;
  const setup = replayOptions(rules, parsed.values.get("accounts")?.[0]);
  if ("errors" in setup) {
    io.stderr.write(`${setup.errors.join("\n")}\n`);
    return 2;
  }
  const tracePath = parsed.values.get("trace")?.[0];
  const out = new BufferedWriter(io.stdout);
  const replayer = new Replayer(rules, { ...setup.options, denies });
  let kind: TraceKind | null = null;
  const sink = simulationSink(replayer, out, () => kind === "keyed" && ruleId === undefined);
  const result = await feedAnyTrace(sink, tracePath, tracePath ?? "<stdin>", io, {
    columns: columnsFor([...rules, ...denies]),
    label: "sluice simulate",
    onKind: (k) => {
      kind = k;
    },
  });
  await out.flush();
  if (kind === "keyed" && ruleId === undefined)
    return usageError(cmd, "--rule RULE_ID is required for a t_ms,key,cost trace");
  if (result.errors.length > 0) {
    io.stderr.write(`${result.errors.join("\n")}\n`);
    return 2;
  }
  return 0;
}

/**
 * The rules to replay: all of them (deny rules too), or the one with id `ruleId` (a limit rule or a deny rule); exit
 * status 2 (the simulate contract) if not.
 */
function rulesNamed(
  rulesPaths: string[],
  ruleId: string | undefined,
  io: Io,
): { rules: ResolvedRule[]; denies: DenyRule[] } | number {
  const loaded = loadRules(rulesPaths);
  if (loaded.errors.length > 0) {
    io.stderr.write(`${loaded.errors.join("\n")}\n`);
    return 2;
  }
  if (ruleId === undefined) return loaded;
  const rules = loaded.rules.filter((r) => r.id === ruleId);
  const denies = loaded.denies.filter((r) => r.id === ruleId);
  if (rules.length + denies.length === 0) {
    const ids = [...loaded.rules, ...loaded.denies].map((r) => r.id);
    io.stderr.write(`${rulesPaths.join(", ")}: ${unknownRuleId(ruleId, ids)}\n`);
    return 2;
  }
  return { rules, denies };
}

/** Each request replayed and its JSON line written (nothing when `skip()` says the run is a usage error). */
function simulationSink(replayer: Replayer, out: BufferedWriter, skip: () => boolean): TraceSink {
  const keyJson = new Map<number, string>();
  const jsonOf = (key: number) => {
    let json = keyJson.get(key);
    if (json === undefined) {
      json = JSON.stringify(replayer.keys.name(key));
      if (keyJson.size < 100_000) keyJson.set(key, json);
    }
    return json;
  };
  return {
    keyed(tMs, key, cost, outcome) {
      if (skip()) return;
      const a = replayer.keyed(tMs, key, cost, outcome ?? null)[0]!;
      const head = `{"t_ms":${tMs},"key":${jsonOf(a.key)},"cost":${cost},`;
      out.append(a.decision === null ? `${head}"error":"cost_exceeds_capacity"}\n` : `${head}${decisionJson(a)}}\n`);
    },
    request(line) {
      out.append(requestJson(line, replayer.request(line), replayer, jsonOf));
    },
  };
}

function decisionJson(a: RuleAnswer): string {
  const d = a.decision!;
  return `"allowed":${d.allowed},"remaining":${d.remaining},"reset_after_ms":${d.resetAfterMs},"retry_after_ms":${d.retryAfterMs === null ? "null" : d.retryAfterMs},"delay_ms":${d.delayMs}`;
}

const STATUS = { allowed: 200, delayed: 200, unauthorized: 401, too_costly: 400, bad_request: 400 } as const;

function requestJson(line: RequestLine, r: Replayed, replayer: Replayer, jsonOf: (key: number) => string): string {
  const v = r.verdict;
  const verdict = v.kind === "admit" ? (v.delayMs > 0 ? "delayed" : "allowed") : v.kind === "deny" ? "denied" : v.kind;
  const status = v.kind === "deny" || v.kind === "forbidden" ? v.status : STATUS[verdict as keyof typeof STATUS];
  const rules = r.answers.map((a) => {
    const rule = replayer.rules[a.rule]!;
    const head = `{"rule":${JSON.stringify(rule.id)},"mode":"${rule.mode}","key":${jsonOf(a.key)},"cost":${a.cost},`;
    return `${head}${a.decision === null ? `"error":"cost_exceeds_capacity"` : `${decisionJson(a)},"refunded":${a.refunded}`}}`;
  });
  const extra =
    v.kind === "unauthorized" || v.kind === "too_costly"
      ? `,"rule":${JSON.stringify(replayer.rules[v.rule]!.id)}`
      : v.kind === "forbidden"
        ? `,"rule":${JSON.stringify(v.rule)}`
        : v.kind === "bad_request"
          ? `,"detail":${JSON.stringify(v.detail)}`
          : "";
  return `{"t_ms":${line.tMs},"method":"${line.method}","path":${JSON.stringify(line.path)},"caller":${r.caller < 0 ? "null" : jsonOf(r.caller)},"verdict":"${verdict}","status":${status},"delay_ms":${v.kind === "admit" ? v.delayMs : 0}${extra},"rules":[${rules.join(",")}]}\n`;
}
