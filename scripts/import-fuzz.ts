/**
 * By hand: both importers over the importer corpus (docs/testing.md, "The importer corpus"), each file damaged at
 * random N times (a line dropped or doubled, a word replaced by something odd, a byte that looks like a space and is
 * not); every run must end with a result or the importer's own error, never a crash (a TypeError, a stack overflow,
 * a run out of memory). test/unit/import.fuzz.props.test.ts does the same on built-in configurations in `npm test`.
 *
 *   node --import tsx scripts/import-fuzz.ts /work/corpus [N=40] [SEED=1]
 */
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EnvoyImportError } from "../src/migrate/envoy_file.ts";
import { importEnvoy } from "../src/migrate/envoy_import.ts";
import { parseMapping } from "../src/migrate/envoy_mapping.ts";
import { NginxImportError, NginxSyntaxError, readNginxConfig } from "../src/migrate/nginx_conf.ts";
import { withZonesElsewhere } from "../src/migrate/nginx_elsewhere.ts";
import { importNginx } from "../src/migrate/nginx_import.ts";

const [dir, nArg, seedArg] = process.argv.slice(2);
if (dir === undefined) {
  process.stderr.write("Usage: node --import tsx scripts/import-fuzz.ts CORPUS_DIR [N] [SEED]\n");
  process.exit(2);
}
const N = Number(nArg ?? 40);
let seed = Number(seedArg ?? 1);
const random = () => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
};
const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!;
const ODD = [
  ...["1.5", "-1", "0", "yes", "{", "}", ";", "''", '"', "zone=", "burst=", "rate=", "99999999999999999999", "~"],
  ...["null", "[a]", "{a: 1}", "*", "$uri", "off", "0x10", "1e3", ":", "- x", "\u00a0", "\ufeff", "\\", "#"],
];

function damaged(text: string): string {
  const lines = text.split("\n");
  for (let k = 1 + Math.floor(random() * 3); k > 0; k--) {
    const i = Math.floor(random() * lines.length);
    const how = random();
    if (how < 0.25) lines.splice(i, 1);
    else if (how < 0.45) lines.splice(i, 0, lines[i] ?? "");
    else {
      const words = (lines[i] ?? "").split(/(\s+)/);
      words[Math.floor(random() * words.length)] = pick(ODD);
      lines[i] = words.join("");
    }
  }
  return lines.join("\n");
}

function files(root: string): string[] {
  return readdirSync(root).flatMap((name) => {
    const path = join(root, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

const parsed = parseMapping([]);
if (!("mapping" in parsed)) throw new Error("the default mapping parses");
const scratch = mkdtempSync(join(tmpdir(), "sluice-import-fuzz-"));
let runs = 0;
let crashes = 0;
const crashed = (kind: string, file: string, error: unknown) => {
  crashes++;
  process.stdout.write(
    `CRASH ${kind} ${file}: ${String((error as Error).stack ?? error)
      .split("\n")
      .slice(0, 3)
      .join(" | ")}\n`,
  );
};
for (const file of files(join(dir, "nginx"))) {
  const text = readFileSync(file, "utf8");
  if (!/limit_(req|conn)/.test(text)) continue;
  const path = join(scratch, "nginx.conf");
  for (let i = 0; i < N; i++, runs++) {
    writeFileSync(path, damaged(text));
    try {
      importNginx(withZonesElsewhere(readNginxConfig(path), path, undefined).config);
    } catch (error) {
      if (!(error instanceof NginxImportError || error instanceof NginxSyntaxError)) crashed("nginx", file, error);
    }
  }
}
for (const file of files(join(dir, "envoy")).filter((f) => /\.ya?ml$/.test(f))) {
  const text = readFileSync(file, "utf8");
  if (!/domain|token_bucket/.test(text)) continue;
  for (let i = 0; i < N; i++, runs++) {
    try {
      importEnvoy(damaged(text), "ratelimit.yaml", parsed.mapping);
    } catch (error) {
      if (!(error instanceof EnvoyImportError)) crashed("envoy", file, error);
    }
  }
}
process.stdout.write(`${runs} damaged files: ${crashes} crashed\n`);
process.exit(crashes === 0 ? 0 : 1);
