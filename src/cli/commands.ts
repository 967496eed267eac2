/**
 * The command table: every `sluice` command, in the order `sluice --help` lists them. Adding a command is one
 * import and one entry here; the command's module imports only `io.ts` and `args.ts` from this folder's plumbing.
 */
import { runAccounts } from "./accounts.ts";
import { runCompare } from "./compare.ts";
import { runCompile } from "./compile.ts";
import { runPlan } from "./deploy_plan.ts";
import { runGen } from "./gen.ts";
import { runImport } from "./import.ts";
import type { Command } from "./io.ts";
import { runSimulate } from "./simulate.ts";
import { runTrace } from "./trace_from.ts";
import { runValidate } from "./validate.ts";

export const COMMANDS: readonly Command[] = [
  { name: "validate", summary: "check rule files and print a summary (default: rules/)", run: runValidate },
  {
    name: "compile",
    summary: "validate the rules and write the resolved rules the Worker is built with",
    run: runCompile,
  },
  {
    name: "simulate",
    summary: "run one rule over a trace (CSV t_ms,key,cost) and print one JSON decision per line",
    run: runSimulate,
  },
  {
    name: "compare",
    summary: "run several rules over one trace and print a table (and an SVG with --svg)",
    run: runCompare,
  },
  { name: "gen", summary: "write a synthetic trace", run: runGen },
  {
    name: "trace",
    summary: "trace from nginx|envoy|cloudflare LOG: turn an access log into a request trace",
    run: runTrace,
  },
  {
    name: "accounts",
    summary: "write an account record (plan, per-account limits) locally and print the production command",
    run: runAccounts,
  },
  {
    name: "import",
    summary:
      "turn an nginx.conf, an Envoy rate limit configuration, Cloudflare rate limiting rules or AWS WAF rate-based rules into Sluice rules, with a report",
    run: runImport,
  },
  {
    name: "plan",
    summary: "compare two rule sets: changed fields, live state on deploy, answers that flip on a trace",
    run: runPlan,
  },
];
