/**
 * `sluice import nginx|envoy|cloudflare|aws-waf FILE`: another proxy's rate limits as a Sluice rule file, and a report of
 * what was mapped approximately or left out. The work is in src/migrate/; this file reads, writes and sets the exit
 * status.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { basename } from "node:path";
import { AwsImportError, importAwsWaf } from "../migrate/aws_import.ts";
import { type IpSet, readIpSet } from "../migrate/aws_ip_set.ts";
import { CloudflareImportError, importCloudflare } from "../migrate/cloudflare_import.ts";
import { readCloudflareList } from "../migrate/cloudflare_lists.ts";
import { EnvoyImportError, load } from "../migrate/envoy_file.ts";
import { importEnvoy } from "../migrate/envoy_import.ts";
import { parseMapping } from "../migrate/envoy_mapping.ts";
import { NginxImportError, NginxSyntaxError, readNginxConfig, type UnreadInclude } from "../migrate/nginx_conf.ts";
import { withZonesElsewhere } from "../migrate/nginx_elsewhere.ts";
import { importNginx } from "../migrate/nginx_import.ts";
import { formatReport, type ImportResult, leftOut, rulesYaml } from "../migrate/report.ts";
import { parseRules } from "../rules/yaml.ts";
import { commandArgs, EXIT_CODES, inputError, usageError } from "./args.ts";
import type { Io } from "./io.ts";

const HELP = `Usage: sluice import nginx FILE [--root DIR] | cloudflare|aws-waf FILE.json [--out RULES.yaml] [--allow-partial]
       sluice import envoy FILE [--envoy ENVOY.yaml] [--map KEY=MEANING]... [--out RULES.yaml] [--allow-partial]

Reads another proxy's rate limits and writes them as Sluice rules (to --out, or standard output), each with a
comment naming the directive it came from, and prints a report on standard error: every limit mapped
approximately (and why), every one left out, and a summary. A configuration its own system would not load (what
nginx -t or the ratelimit service refuses) is refused, with that system's reason and the file and line.
docs/rules.md, "Coming from NGINX", "Coming from Envoy", "Coming from Cloudflare" and "Coming from AWS WAF"
describe the mapping.

  nginx FILE   an nginx.conf (include is followed): limit_req_zone, limit_req (burst, nodelay, delay=N) in http,
               server and location blocks with NGINX's inheritance, limit_req_status, limit_req_dry_run; and
               limit_conn_zone, limit_conn (requests in flight), limit_conn_status, limit_conn_dry_run
  envoy FILE   an envoyproxy/ratelimit service configuration (domain, descriptors), or a local rate limit filter
               configuration (its token bucket and descriptors; also found inside a bootstrap file)
  cloudflare FILE  Cloudflare WAF rate limiting rules as the Rulesets API returns them ({"result": {"rules": [...]}},
               {"rules": [...]} or a list of rules): expression (path, method, header, cookie and query tests),
               characteristics, period, requests_per_period, mitigation_timeout, counting_expression (response
               status), action (block, log, challenges) and enabled; each a sliding window of its period
  aws-waf FILE  AWS WAF rate-based rules as aws wafv2 get-web-acl or get-rule-group prints them ({"WebACL":
               {"Rules": [...]}}, {"RuleGroup": {"Rules": [...]}} or a list of rules): Limit, EvaluationWindowSec,
               AggregateKeyType and CustomKeys, ScopeDownStatement (string, regex, size, geo and ASN matches on the
               path, method, a header, query argument or cookie; And, Or, Not) and Action (Block, Count, Captcha,
               Challenge); each a sliding window of its EvaluationWindowSec. Other rules are noted and skipped
  --list NAME=FILE cloudflare: a custom IP list's items as the Lists API returns them (repeatable): the expression's
                   $NAME is read as them (ip.src in $NAME is match.address)
  --ip-set FILE    aws-waf: an IP set as aws wafv2 get-ip-set prints it (repeatable): an IPSetReferenceStatement to
                   it becomes match.address (its NotStatement match.except_address); without it, the rule is left out
  --envoy FILE     envoy: the Envoy configuration whose routes' rate_limits actions say what the descriptors mean
                   (request_headers, query_parameters, generic_key and header_value_match on :path/:method; a
                   file's own routes are read too; hits_addend is the rules' cost) and whose ratelimit filter says
                   the domain, failure_mode_deny (on_error: closed) and rate_limited_status; --map wins over it
  --map KEY=api_key|ip|user          envoy: a descriptor key that names the caller (remote_address is ip already)
  --map KEY=header:NAME|ip:V4:V6     envoy: a descriptor key from request_headers, or masked_remote_address's masks
  --map KEY:VALUE=route:METHOD /path envoy: which requests a valued descriptor stands for (also plan:NAME, any)
  --root DIR       nginx: read absolute include paths under DIR (a configuration copied off its server: --root
                   copy/ reads include /etc/nginx/conf.d/*.conf from copy/etc/nginx/conf.d/). An include that names
                   no file is reported (left out; only noted for NGINX's stock files such as mime.types)
  --out FILE       write the rules there instead of standard output
  --allow-partial  exit 0 even when something was left out

${EXIT_CODES}Also 1, writing nothing, when something was left out (unless --allow-partial) or FILE has no rate limits.
`;

export async function runImport(args: string[], io: Io): Promise<number> {
  const cmd = { name: "import", help: HELP, stdout: io.stdout, stderr: io.stderr };
  const parsed = commandArgs(cmd, args, {
    values: ["out", "map", "root", "envoy", "ip-set", "list"],
    repeated: ["map", "ip-set", "list"],
    booleans: ["allow-partial"],
    positionals: true,
  });
  if (typeof parsed === "number") return parsed;
  const [kind, file, extra] = parsed.positionals;
  if (kind !== "nginx" && kind !== "envoy" && kind !== "cloudflare" && kind !== "aws-waf")
    return usageError(cmd, `expected "nginx", "envoy", "cloudflare" or "aws-waf", got ${JSON.stringify(kind ?? "")}`);
  if (file === undefined) return usageError(cmd, `sluice import ${kind} needs a FILE`);
  if (extra !== undefined) return usageError(cmd, `unexpected argument "${extra}"`);
  if (kind !== "envoy" && parsed.values.has("map")) return usageError(cmd, "--map is for envoy");
  if (kind !== "nginx" && parsed.values.has("root")) return usageError(cmd, "--root is for nginx");
  if (kind !== "envoy" && parsed.values.has("envoy")) return usageError(cmd, "--envoy is for envoy");
  if (kind !== "aws-waf" && parsed.values.has("ip-set")) return usageError(cmd, "--ip-set is for aws-waf");
  if (kind !== "cloudflare" && parsed.values.has("list")) return usageError(cmd, "--list is for cloudflare");
  const lists = (parsed.values.get("list") ?? []).map((l) => /^([A-Za-z0-9_]+)=(.+)$/.exec(l));
  if (lists.some((l) => l === null))
    return usageError(cmd, "--list takes NAME=FILE (the name an expression gives as $NAME)");
  const imported = importFile(
    kind,
    file,
    parsed.values.get("map") ?? [],
    parsed.values.get("root")?.[0],
    parsed.values.get("envoy")?.[0],
    { ipSets: parsed.values.get("ip-set") ?? [], lists: lists.map((l) => [l![1]!, l![2]!] as const) },
  );
  if ("usage" in imported) return usageError(cmd, imported.usage);
  if ("error" in imported) return inputError(io, [imported.error]);
  return writeResult(
    imported.result,
    `${kind} ${basename(file)}`,
    parsed.values.get("out")?.[0],
    parsed.booleans.has("allow-partial"),
    io,
  );
}

/** The import of one file, or the error to print (exit 1), or a usage error (exit 2). */
export function importFile(
  kind: "nginx" | "envoy" | "cloudflare" | "aws-waf",
  file: string,
  maps: readonly string[],
  root?: string,
  envoyConfig?: string,
  files: { readonly ipSets?: readonly string[]; readonly lists?: readonly (readonly [string, string])[] } = {},
): { result: ImportResult } | { error: string } | { usage: string } {
  try {
    if (kind === "nginx") {
      const unread: UnreadInclude[] = [];
      const elsewhere = withZonesElsewhere(readNginxConfig(file, { unread, absoluteUnder: root }), file, root);
      const result = importNginx(elsewhere.config, unread);
      return { result: { rules: result.rules, report: [...elsewhere.report, ...result.report] } };
    }
    if (kind === "cloudflare" || kind === "aws-waf") return importRulesJson(kind, file, files);
    const mapping = parseMapping(maps);
    if ("error" in mapping) return { usage: mapping.error };
    const text = readText(file);
    if (typeof text !== "string") return text;
    let routes: unknown = null;
    if (envoyConfig !== undefined) {
      try {
        routes = load(readFileSync(envoyConfig, "utf8"), envoyConfig).value;
      } catch (err) {
        if (err instanceof EnvoyImportError) throw err;
        return {
          error: `${envoyConfig}: cannot read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
        };
      }
    }
    return { result: importEnvoy(text, file, mapping.mapping, routes) };
  } catch (err) {
    if (
      err instanceof NginxSyntaxError ||
      err instanceof NginxImportError ||
      err instanceof EnvoyImportError ||
      err instanceof CloudflareImportError ||
      err instanceof AwsImportError
    ) {
      return { error: err.message };
    }
    throw err;
  }
}

/** Cloudflare's or AWS WAF's rules, with the lists (IP sets) their expressions name by reference only. */
function importRulesJson(
  kind: "cloudflare" | "aws-waf",
  file: string,
  files: { readonly ipSets?: readonly string[]; readonly lists?: readonly (readonly [string, string])[] },
): { result: ImportResult } | { error: string } {
  const text = readText(file);
  if (typeof text !== "string") return text;
  if (kind === "cloudflare") {
    const lists = new Map<string, readonly string[]>();
    for (const [name, f] of files.lists ?? []) {
      const listText = readText(f);
      if (typeof listText !== "string") return listText;
      lists.set(name, readCloudflareList(listText, f));
    }
    return { result: importCloudflare(text, file, lists) };
  }
  const sets: IpSet[] = [];
  for (const f of files.ipSets ?? []) {
    const setText = readText(f);
    if (typeof setText !== "string") return setText;
    sets.push(readIpSet(setText, f));
  }
  return { result: importAwsWaf(text, file, sets) };
}

function readText(file: string): string | { error: string } {
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    return { error: `${file}: cannot read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
  }
}

const NOTHING: Readonly<Record<string, string>> = {
  nginx: "no limit_req or limit_conn",
  envoy: "no rate_limit",
  cloudflare: "no rules",
  "aws-waf": "no rules",
};

async function writeResult(
  result: ImportResult,
  from: string,
  out: string | undefined,
  allowPartial: boolean,
  io: Io,
): Promise<number> {
  if (result.rules.length === 0 && result.report.length === 0)
    return inputError(io, [
      `sluice import: ${from} has no rate limits to import (${NOTHING[from.slice(0, from.indexOf(" "))]}); nothing written`,
    ]);
  const yaml = rulesYaml(result, `Imported from ${from} by sluice import.`);
  const check = parseRules(yaml, out ?? "<imported rules>");
  if (check.errors.length > 0)
    return inputError(io, ["sluice import: the imported rules do not validate:", ...check.errors]);
  io.stderr.write(formatReport(result));
  const missing = leftOut(result);
  // Exiting 1 writes nothing: a rule file missing limits must not land in rules/ (or a pipe) as if complete.
  if (missing > 0 && !allowPartial) {
    io.stderr.write(
      `sluice import: ${missing} left out; nothing written; rerun with --allow-partial to accept the rules without them\n`,
    );
    return 1;
  }
  if (out === undefined) io.stdout.write(yaml);
  else {
    try {
      writeFileSync(out, yaml);
    } catch (err) {
      return inputError(io, [`sluice import: cannot write ${out}: ${(err as Error).message}`]);
    }
  }
  return 0;
}
