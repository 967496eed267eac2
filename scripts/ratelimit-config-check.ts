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
import { EnvoyImportError } from "../src/migrate/envoy_file.ts";
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
process.exit(differ === 0 ? 0 : 1);
