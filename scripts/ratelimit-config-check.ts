/**
 * `npm run test:ratelimit-config -- RATELIMIT [COMMIT] [CORPUS]`, by hand: the envoyproxy/ratelimit service's own
 * configuration loader (its src/config, from RATELIMIT: a checkout, or a git directory with COMMIT) built against the
 * stubs in scripts/ratelimit-config/ (Debian packages the rest), run on every configuration of
 * test/support/ratelimit_cases.ts and, given CORPUS, on the importer corpus's service files. `sluice import envoy`
 * must refuse exactly the files the service refuses. Not part of `npm test`: CI has neither Go nor the service.
 *
 *   apt-get install -y golang-go golang-gopkg-yaml.v2-dev golang-github-sirupsen-logrus-dev golang-google-protobuf-dev
 *   npm run test:ratelimit-config -- /path/to/ratelimit            # a checkout
 *   npm run test:ratelimit-config -- /path/to/ratelimit.git f2fb157 /work/corpus
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { EnvoyImportError, load } from "../src/migrate/envoy_file.ts";
import { importEnvoy } from "../src/migrate/envoy_import.ts";
import { parseMapping } from "../src/migrate/envoy_mapping.ts";
import { ACCEPTED, REFUSED } from "../test/support/ratelimit_cases.ts";

const [source, commitOrCorpus, corpusArg] = process.argv.slice(2);
if (source === undefined) {
  process.stderr.write("Usage: npm run test:ratelimit-config -- RATELIMIT_CHECKOUT_OR_GIT_DIR [COMMIT] [CORPUS]\n");
  process.exit(2);
}
const isGitDir = !statSync(source).isDirectory() || !readdirSync(source).includes("src");
const commit = isGitDir ? (commitOrCorpus ?? "HEAD") : "HEAD";
const corpus = isGitDir ? corpusArg : commitOrCorpus;

const dir = mkdtempSync(join(tmpdir(), "sluice-ratelimit-config-"));
const probe = join(dir, "probe");
execFileSync("sh", [fileURLToPath(new URL("./ratelimit-config/build.sh", import.meta.url)), source, commit, probe], {
  stdio: "inherit",
});

/** Every case as a file: the shared table's, and the corpus's service configurations. */
const cases: { name: string; file: string; text: string }[] = [...REFUSED, ...ACCEPTED].map(([name, text], i) => {
  const file = join(dir, `case${i}.yaml`);
  writeFileSync(file, text);
  return { name, file, text };
});
const walk = (d: string): string[] =>
  readdirSync(d).flatMap((n) => (statSync(join(d, n)).isDirectory() ? walk(join(d, n)) : [join(d, n)]));
if (corpus !== undefined) {
  for (const file of walk(join(corpus, "envoy")).filter((f) => /\.ya?ml$/.test(f))) {
    const text = readFileSync(file, "utf8");
    if (/^domain:|^descriptors:/m.test(text) && !/^kind:|token_bucket|static_resources/m.test(text))
      cases.push({ name: file.slice(corpus.length + 1), file, text });
  }
}

const service = new Map<string, { verdict: string; why?: string }>(
  execFileSync(
    probe,
    cases.map((c) => c.file),
    { encoding: "utf8", maxBuffer: 1 << 26 },
  )
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { file: string; verdict: string; why?: string })
    .map((r) => [r.file, r]),
);
const parsed = parseMapping([]);
if (!("mapping" in parsed)) throw new Error("the default mapping parses");
let differ = 0;
for (const c of cases) {
  let ours: { verdict: string; why?: string };
  try {
    importEnvoy(c.text, c.file, parsed.mapping);
    ours = { verdict: "accept" };
  } catch (error) {
    if (!(error instanceof EnvoyImportError)) throw error;
    ours = { verdict: "refuse", why: error.message };
  }
  const theirs = service.get(c.file)!;
  if (theirs.verdict !== ours.verdict) {
    differ++;
    process.stdout.write(
      `DIFFER ${c.name}\n  service: ${JSON.stringify(theirs)}\n  sluice:  ${JSON.stringify(ours)}\n`,
    );
  } else if (process.argv.includes("--verbose")) {
    process.stdout.write(`same   ${c.name}: ${theirs.verdict}${theirs.why === undefined ? "" : ` (${theirs.why})`}\n`);
  }
}
process.stdout.write(
  `${cases.length} configurations: ${cases.length - differ} judged alike by the service's loader and the import, ${differ} differ\n`,
);

// Phase 2: which limit a request's descriptor gets. For every service configuration the service loads, each path of
// its tree becomes request descriptors (a valueless entry takes a value of its own and each value its level holds),
// and the service's `GetLimit` says which descriptor's limit applies. The import's rules claim a descriptor by their
// chains (a valueless step: any value but those `except:` gives to a sibling); every descriptor must be claimed by
// exactly the rule of the service's choice, with the service's count, unit and shadow mode, or by none when the service
// applies none or the import's report says that chain was left out, except where the report says a rule is
// approximate. Keys mean headers (`--map K=header:K`) and values routes (`--map K:V=route:GET /K/V`).
type Obj = Record<string, unknown>;
interface Node {
  readonly key: string;
  readonly value: string;
  readonly children: readonly Node[];
}
const nodesOf = (list: unknown): Node[] =>
  Array.isArray(list)
    ? list.flatMap((d) =>
        typeof d === "object" && d !== null && typeof (d as Obj).key === "string"
          ? [
              {
                key: String((d as Obj).key),
                value: (d as Obj).value == null ? "" : String((d as Obj).value),
                children: nodesOf((d as Obj).descriptors),
              },
            ]
          : [],
      )
    : [];
function descriptorsOf(level: readonly Node[], prefix: string[]): string[][] {
  const out: string[][] = [];
  for (const n of level) {
    const values =
      n.value !== ""
        ? [n.value]
        : ["zz-other", ...level.filter((m) => m.key === n.key && m.value !== "").map((m) => m.value)];
    for (const v of values) {
      if (v.includes("*")) continue;
      const here = [...prefix, `${n.key}=${v}`];
      out.push(here);
      out.push(...descriptorsOf(n.children, here));
    }
  }
  return out;
}
/** The window a service unit means (fixed windows from the epoch; a month 30 days, a year 365). */
const WINDOWS: Readonly<Record<string, string>> = {
  SECOND: "s",
  MINUTE: "min",
  HOUR: "h",
  DAY: "d",
  WEEK: "7d",
  MONTH: "30d",
  YEAR: "365d",
};
let lookups = 0;
let wrong = 0;
for (const c of cases) {
  if (service.get(c.file)?.verdict !== "accept") continue;
  const read = load(c.text, c.file, "go-yaml-v2");
  const root = read.value as Obj;
  const tree = nodesOf(root.descriptors);
  const descriptors = [...new Set(descriptorsOf(tree, []).map((d) => d.join(",")))];
  if (descriptors.length === 0) continue;
  const keys = new Set<string>();
  const walkKeys = (level: readonly Node[]) => {
    for (const n of level) {
      keys.add(n.value === "" ? `${n.key}=header:${n.key}` : `${n.key}:${n.value}=route:GET /${n.key}/${n.value}`);
      walkKeys(n.children);
    }
  };
  walkKeys(tree);
  const mapped = parseMapping([...keys].filter((k) => !k.includes("*")));
  if (!("mapping" in mapped)) continue;
  let imported: ReturnType<typeof importEnvoy>;
  try {
    imported = importEnvoy(c.text, c.file, mapped.mapping);
  } catch (error) {
    // A file the mapping's meanings make the import refuse has no rules to look up; anything else is a crash.
    if (!(error instanceof EnvoyImportError)) throw error;
    process.stdout.write(`skipped ${c.name}: ${error.message}\n`);
    continue;
  }
  const answers = execFileSync(probe, ["--lookup", c.file, String(root.domain), ...descriptors], { encoding: "utf8" })
    .trim()
    .split("\n")
    .map(
      (l) =>
        JSON.parse(l) as {
          descriptor: string;
          limit: { key: string; unlimited: boolean; requests_per_unit: number; unit: string; shadow: boolean } | null;
        },
    );
  for (const a of answers) {
    lookups++;
    const entries = a.descriptor.split(",").map((e) => e.split("=") as [string, string]);
    const claims = imported.rules.filter((rule) => {
      const chain = /descriptor (.*): \d+ per /.exec(rule.source)?.[1]?.split(" > ") ?? [];
      if (chain.length !== entries.length) return false;
      const except = [rule.match.except ?? []].flat();
      return chain.every((step, i) => {
        const [k, v] = step.split("=");
        const [dk, dv] = entries[i]!;
        if (k !== dk) return false;
        return v === undefined ? !except.includes(`GET /${dk}/${dv}`) : v === dv;
      });
    });
    const approximate = claims.some((rule) => rule.notes.some((n) => n.startsWith("approximate: a request with")));
    // The service's stats key of the limit it applies (`domain.k1_v1.k2`), and each claiming rule's, made the same way.
    const chosen = a.limit === null || a.limit.unlimited ? null : a.limit.key;
    // With `detailed_metric`, the service's key holds the request's values for the valueless steps too.
    const keyOf = (rule: (typeof claims)[number], detailed: boolean) => {
      const chain = /descriptor (.*): \d+ per /.exec(rule.source)?.[1]?.split(" > ") ?? [];
      const steps = chain.map((step, i) =>
        step.includes("=") ? step.replace("=", "_") : detailed ? `${step}_${entries[i]![1]}` : step,
      );
      return `${String(root.domain)}.${steps.join(".")}`;
    };
    const claimed = claims.map((rule) => keyOf(rule, false));
    const same = claims.length === 1 && (keyOf(claims[0]!, false) === chosen || keyOf(claims[0]!, true) === chosen);
    // No rule claiming the service's choice passes only where the import's report says that chain was left out (its
    // chains are `k=v` or `k` per entry; the one whose stats key is the service's). Before, any unclaimed descriptor
    // passed, so an import that silently dropped rules passed too.
    const chainsOf = (i: number): string[][] =>
      i === entries.length
        ? [[]]
        : chainsOf(i + 1).flatMap((rest) => [
            [`${entries[i]![0]}=${entries[i]![1]}`, ...rest],
            [entries[i]![0], ...rest],
          ]);
    const statsKey = (chain: readonly string[], detailed: boolean) =>
      `${String(root.domain)}.${chain.map((step, i) => (step.includes("=") ? step.replace("=", "_") : detailed ? `${step}_${entries[i]![1]}` : step)).join(".")}`;
    const reportedLeftOut =
      chosen !== null &&
      chainsOf(0).some(
        (chain) =>
          (statsKey(chain, false) === chosen || statsKey(chain, true) === chosen) &&
          imported.report.some((r) => r.kind === "left out" && r.message.startsWith(`${chain.join(" > ")}: `)),
      );
    // The claiming rule must also say the service's limit: its count, its window (the service's units as the
    // import's docs give them) and shadow mode. Before, only the stats key was compared, so a wrong count passed.
    const field = (name: string) => claims[0]?.fields.find(([k]) => k === name)?.[1];
    const spoken =
      a.limit === null ||
      (field("limit") === a.limit.requests_per_unit &&
        field("window") === WINDOWS[a.limit.unit] &&
        (field("mode") === "shadow") === a.limit.shadow);
    const ok =
      approximate ||
      (chosen === null ? claims.length === 0 : (same && spoken) || (claims.length === 0 && reportedLeftOut));
    if (!ok) {
      wrong++;
      process.stdout.write(
        `LOOKUP ${c.name} ${a.descriptor}: the service applies ${chosen ?? "no limit"}${a.limit === null ? "" : ` (${a.limit.requests_per_unit} per ${a.limit.unit}${a.limit.shadow ? ", shadow" : ""})`}, the import's rules ${claimed.join(" and ") || "none"}${claims.length === 1 ? ` (${field("limit")} per ${field("window")}${field("mode") === "shadow" ? ", shadow" : ""})` : ""}\n`,
      );
    }
  }
}
process.stdout.write(
  `${lookups} descriptors looked up: ${lookups - wrong} claimed as the service chose, ${wrong} not\n`,
);
process.exit(differ === 0 && wrong === 0 ? 0 : 1);
