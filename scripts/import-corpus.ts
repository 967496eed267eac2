/**
 * `npm run test:corpus -- DIR`: both importers over a corpus of real public configurations, kept outside the
 * repository (docs/testing.md, "The importer corpus", says how it is gathered and why it is not committed).
 * test/corpus/manifest.json names every file (its repository, path and commit) and the outcome expected of it:
 * `imported` (rules, nothing left out), `partial` (rules, and some limits left out with a reason), `refused` (an error
 * message, exit 1), `empty` (no rate limits). DIR holds `KIND/OWNER+REPO/PATH` for each entry.
 * Fails on a crash (any exception other than an import error), on imported rules that do not validate, on a file
 * missing from DIR, and on any outcome that differs from the manifest. `--write` rewrites the manifest's outcomes
 * from this run (after reviewing the differences it printed).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { importFile } from "../src/cli/import.ts";
import { formatReport, leftOut, rulesYaml } from "../src/migrate/report.ts";
import { parseRules } from "../src/rules/yaml.ts";

const MANIFEST = "test/corpus/manifest.json";

type Outcome =
  | { readonly outcome: "imported"; readonly rules: number }
  | { readonly outcome: "partial"; readonly rules: number; readonly leftOut: number }
  | { readonly outcome: "refused"; readonly message: string }
  | { readonly outcome: "empty" };

interface Entry {
  readonly kind: "nginx" | "envoy";
  readonly repo: string;
  readonly path: string;
  readonly commit: string;
  /** `--map` arguments for an Envoy file, when the entry tries one. */
  readonly map?: readonly string[];
  /** `--envoy`: the path (in the same repository) of the Envoy configuration whose route actions the entry reads. */
  readonly envoy?: string;
  readonly expect: Outcome;
}

/** What importing one corpus file gives, or the crash it caused (a message with its stack). */
function run(dir: string, entry: Entry): { outcome: Outcome; report: string } | { crash: string } {
  const file = join(entry.kind, entry.repo.replace("/", "+"), entry.path);
  let imported: ReturnType<typeof importFile>;
  try {
    // Absolute includes name files on the server the configuration came from: read them under its repository.
    const repoDir = join(dir, entry.kind, entry.repo.replace("/", "+"));
    const root = entry.kind === "nginx" ? repoDir : undefined;
    const routes = entry.envoy === undefined ? undefined : join(repoDir, entry.envoy);
    imported = importFile(entry.kind, join(dir, file), entry.map ?? [], root, routes);
  } catch (err) {
    return { crash: err instanceof Error ? (err.stack ?? err.message) : String(err) };
  }
  if ("usage" in imported) return { crash: `usage error: ${imported.usage}` };
  if ("error" in imported) {
    return { outcome: { outcome: "refused", message: imported.error.replaceAll(`${dir}/`, "") }, report: "" };
  }
  const result = imported.result;
  if (result.rules.length === 0 && result.report.length === 0) return { outcome: { outcome: "empty" }, report: "" };
  const check = parseRules(rulesYaml(result, file), file);
  if (check.errors.length > 0) return { crash: `the imported rules do not validate:\n${check.errors.join("\n")}` };
  const missing = leftOut(result);
  const report = formatReport(result).replaceAll(`${dir}/`, "");
  return missing === 0
    ? { outcome: { outcome: "imported", rules: result.rules.length }, report }
    : { outcome: { outcome: "partial", rules: result.rules.length, leftOut: missing }, report };
}

function main(argv: readonly string[]): number {
  const write = argv.includes("--write");
  const verbose = argv.includes("--verbose");
  const given = argv.find((a) => !a.startsWith("--"));
  const dir = given === undefined ? undefined : resolve(given);
  if (dir === undefined) {
    process.stderr.write(
      "Usage: npm run test:corpus -- DIR [--verbose] [--write]\n  DIR: the corpus (KIND/OWNER+REPO/PATH for every entry of test/corpus/manifest.json); docs/testing.md says how to gather it\n",
    );
    return 2;
  }
  const manifest = JSON.parse(readFileSync(MANIFEST, "utf8")) as { readme: string; files: Entry[] };
  const failures: string[] = [];
  const counts: Record<string, number> = { imported: 0, partial: 0, refused: 0, empty: 0, crashed: 0, missing: 0 };
  const updated: Entry[] = [];
  for (const entry of manifest.files) {
    const name = `${entry.kind} ${entry.repo} ${entry.path}${entry.envoy === undefined ? "" : ` --envoy ${entry.envoy}`}${(entry.map ?? []).map((m) => ` --map ${m}`).join("")}`;
    const path = join(dir, entry.kind, entry.repo.replace("/", "+"), entry.path);
    if (!existsSync(path)) {
      counts.missing!++;
      failures.push(`${name}: not in ${relative(".", dir) || "."} (gather it as docs/testing.md says)`);
      updated.push(entry);
      continue;
    }
    const got = run(dir, entry);
    if ("crash" in got) {
      counts.crashed!++;
      failures.push(`${name}: CRASH\n${got.crash}`);
      updated.push(entry);
      continue;
    }
    counts[got.outcome.outcome]!++;
    if (verbose) process.stdout.write(`== ${name}: ${JSON.stringify(got.outcome)}\n${got.report}`);
    if (JSON.stringify(got.outcome) !== JSON.stringify(entry.expect)) {
      failures.push(`${name}: expected ${JSON.stringify(entry.expect)}\n  got ${JSON.stringify(got.outcome)}`);
    }
    updated.push({ ...entry, expect: got.outcome });
  }
  const byKind = (k: string) => manifest.files.filter((f) => f.kind === k).length;
  process.stdout.write(
    `${manifest.files.length} files (${byKind("nginx")} nginx, ${byKind("envoy")} envoy): ${counts.imported} imported, ${counts.partial} imported with limits left out, ${counts.refused} refused with a message, ${counts.empty} without rate limits, ${counts.crashed} crashed, ${counts.missing} missing\n`,
  );
  for (const f of failures) process.stdout.write(`FAIL ${f}\n`);
  if (write) {
    writeFileSync(MANIFEST, `${JSON.stringify({ ...manifest, files: updated }, null, 2)}\n`);
    process.stdout.write(`${MANIFEST} rewritten from this run\n`);
  }
  return failures.length === 0 ? 0 : 1;
}

process.exitCode = main(process.argv.slice(2));
