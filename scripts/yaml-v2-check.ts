/**
 * `npm run test:yaml-v2`, by hand: `sluice import envoy` reads a ratelimit service configuration as the service does,
 * checked against the real gopkg.in/yaml.v2 (the service's own YAML library, 2.4.0 in its go.mod and in Debian's
 * golang-gopkg-yaml.v2-dev). scripts/yaml-v2/main.go decodes each case with yaml.v2 as the service does (its untyped
 * pass, then its typed one); src/migrate/envoy_file.ts's `go-yaml-v2` reading and envoy_service_check.ts must give
 * the same verdict, and for a file both take, the same text, numbers and booleans in every field the import reads.
 * The cases are YAML 1.1's corners: boolean words, number forms, floats, timestamps, sexagesimal numbers, null forms,
 * scalars of other types in text fields. Not part of `npm test` (CI has no Go); needs `go` and the package:
 *
 *   apt-get install -y golang-go golang-gopkg-yaml.v2-dev && npm run test:yaml-v2
 */
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { EnvoyImportError, isObject, load, type Obj } from "../src/migrate/envoy_file.ts";
import { checkService } from "../src/migrate/envoy_service_check.ts";

const GOPATH_SYSTEM = "/usr/share/gocode";

function probe(): string {
  const go = spawnSync("sh", ["-c", "command -v go"], { encoding: "utf8" }).stdout.trim();
  if (go === "" || !existsSync(join(GOPATH_SYSTEM, "src/gopkg.in/yaml.v2"))) {
    process.stderr.write("needs Go and yaml.v2: apt-get install -y golang-go golang-gopkg-yaml.v2-dev\n");
    process.exit(1);
  }
  const dir = mkdtempSync(join(tmpdir(), "sluice-yaml-v2-"));
  mkdirSync(join(dir, "src/probe"), { recursive: true });
  copyFileSync(fileURLToPath(new URL("./yaml-v2/main.go", import.meta.url)), join(dir, "src/probe/main.go"));
  execFileSync(go, ["build", "-o", join(dir, "probe"), "probe"], {
    env: { ...process.env, GO111MODULE: "off", GOPATH: `${GOPATH_SYSTEM}:${dir}`, GOCACHE: join(dir, "cache") },
    stdio: "inherit",
  });
  return join(dir, "probe");
}

const doc = (v: { key?: string; value?: string; shadow?: string; unit?: string; n?: string; extra?: string }) =>
  `domain: edge\ndescriptors:\n  - key: ${v.key ?? "k"}\n${v.value === undefined ? "" : `    value: ${v.value}\n`}` +
  `${v.shadow === undefined ? "" : `    shadow_mode: ${v.shadow}\n`}${v.extra ?? ""}` +
  `    rate_limit: { unit: ${v.unit ?? "second"}, requests_per_unit: ${v.n ?? "5"} }\n`;

const BOOLS = "y Y yes Yes YES on On ON true True TRUE n N no No NO off Off OFF false False FALSE ~ null 1 0".split(
  " ",
);
const SCALARS = [
  ...["1.0", "1e3", ".inf", ".NaN", "010", "0x1F", "0b101", "0o17", "1_000", "+5", "-3", "1:20", "1:20.5"],
  ...["2001-12-14", "2001-12-14T21:59:43.10-05:00", "true", "yes", "~", "null", '""', "'x y'", "12345678901234567890"],
];
const COUNTS = ["5", "010", "0x10", "0b11", "1_000", "+5", "1e3", "5.0", '"5"', "4294967295", "4294967296", "-1", "~"];

const CASES: string[] = [
  ...BOOLS.map((b) => doc({ shadow: b })),
  ...BOOLS.map((b) => doc({ shadow: `"${b}"` })),
  ...SCALARS.map((s) => doc({ value: s })),
  ...SCALARS.filter((s) => !["~", "null", '""'].includes(s)).map((s) => doc({ key: s })),
  ...COUNTS.map((n) => doc({ n })),
  // (`unit: 1` or `true` is the text "1" or "true" to both, which the service then refuses as no unit: not YAML's part.)
  ...["Second", "MINUTE"].map((unit) => doc({ unit })),
  doc({ extra: "    yes: 1\n" }),
  doc({ extra: "    1: 1\n" }),
  doc({ extra: "    metadata: { a: 1.5, b: [1.0] }\n" }),
  doc({ extra: "    descriptors: [1.5]\n" }),
];

interface Fields {
  domain: string;
  descriptors: { key: string; value: string; shadow_mode: boolean; rate_limit: { unit: string; n: number } | null }[];
}

/**
 * The fields the import reads, in the probe's terms: Go's zero values for what is not there ("" and 0), which the
 * probe's JSON already has and the import's reading leaves out.
 */
function fieldsOf(root: Obj): Fields {
  const text = (v: unknown) => (v === undefined || v === null ? "" : String(v));
  const list = Array.isArray(root.descriptors) ? (root.descriptors as Obj[]) : [];
  return {
    domain: text(root.domain),
    descriptors: list.map((d) => ({
      key: text(d.key),
      value: text(d.value),
      shadow_mode: d.shadow_mode === true,
      rate_limit: isObject(d.rate_limit)
        ? {
            unit: text(d.rate_limit.unit),
            n: typeof d.rate_limit.requests_per_unit === "number" ? d.rate_limit.requests_per_unit : 0,
          }
        : null,
    })),
  };
}

const bin = probe();
const dir = mkdtempSync(join(tmpdir(), "sluice-yaml-v2-cases-"));
let differ = 0;
for (const [i, text] of CASES.entries()) {
  const file = join(dir, `case${i}.yaml`);
  writeFileSync(file, text);
  const go = JSON.parse(execFileSync(bin, [file], { encoding: "utf8" })) as {
    verdict: string;
    why?: string;
    root?: Obj;
  };
  let ours: { verdict: string; why?: string; fields?: Fields };
  try {
    const read = load(text, file, "go-yaml-v2");
    if (!isObject(read.value)) throw new EnvoyImportError("not a mapping");
    checkService(read.value, file, read);
    ours = { verdict: "accept", fields: fieldsOf(read.value) };
  } catch (error) {
    if (!(error instanceof EnvoyImportError)) throw error;
    ours = { verdict: "refuse", why: error.message };
  }
  const same =
    go.verdict === ours.verdict &&
    (go.verdict === "refuse" || JSON.stringify(fieldsOf(go.root!)) === JSON.stringify(ours.fields));
  if (!same) {
    differ++;
    process.stdout.write(
      `DIFFER ${JSON.stringify(text)}\n  yaml.v2: ${JSON.stringify(go)}\n  sluice:  ${JSON.stringify(ours)}\n`,
    );
  }
}
process.stdout.write(
  `${CASES.length} cases: ${CASES.length - differ} read alike by yaml.v2 and the import, ${differ} differ\n`,
);
process.exit(differ === 0 ? 0 : 1);
