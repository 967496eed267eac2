/**
 * Zones a file uses but another file defines: a `conf.d/` or `sites-enabled/` file's `limit_req zone=api` whose
 * `limit_req_zone` is in nginx.conf. Under `--root DIR` (a configuration copied off its server) the definitions are
 * found among DIR's files and read from there (with the `map`s and `geo`s beside them, which keys may name); without
 * it, the importer names the file that defines the zone (searched beside the file and one folder up) and how to
 * import with it.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { type Directive, httpBlockOf, NginxImportError, NginxSyntaxError, parseText, where } from "./nginx_conf.ts";
import type { ReportItem } from "./report.ts";

const ZONE_DEFINITIONS = new Set(["limit_req_zone", "limit_conn_zone"]);
/** What a zone's definition may need from its file: the zones, and the variables their keys may name. */
const BESIDE_ZONES = new Set([...ZONE_DEFINITIONS, "map", "geo"]);
/** How far `--root` is searched: NGINX's configuration is a few folders deep, a copied tree may hold much else. */
const MAX_FILES = 2000;
const MAX_DEPTH = 6;

/** The configuration with the definitions of the zones it uses but does not define, and what the report says. */
export function withZonesElsewhere(
  config: readonly Directive[],
  file: string,
  root: string | undefined,
): { config: readonly Directive[]; report: ReportItem[] } {
  // Without an http block, server or zone the importer refuses the file as it is; nothing here would change that.
  if (httpBlockOf(config) === null) return { config, report: [] };
  const missing = [...usedZones(config)].filter((name) => !definedZones(config).has(name));
  if (missing.length === 0) return { config, report: [] };
  const report: ReportItem[] = [];
  const added: Directive[] = [];
  const self = resolve(file);
  const underRoot = root === undefined ? [] : candidates(root, MAX_DEPTH).filter((f) => f !== self);
  for (const name of missing) {
    const found = definitionsIn(underRoot, name);
    if (found !== null) {
      const at = found.find((d) => ZONE_DEFINITIONS.has(d.name) && definesZone(d, name))!;
      report.push({ where: where(at), kind: "note", message: `zone ${name} is defined here (found under --root)` });
      added.push(...found.filter((d) => !added.some((a) => same(a, d))));
      continue;
    }
    const nearby = [dirname(self), dirname(dirname(self))].flatMap((d) => candidates(d, 0)).filter((f) => f !== self);
    const there = definitionsIn(nearby, name);
    const user = userOf(config, name);
    const prefix = user === null ? `${file}: ` : `${where(user)}: ${user.name}: `;
    if (there !== null) {
      const def = there.find((d) => ZONE_DEFINITIONS.has(d.name) && definesZone(d, name))!;
      throw new NginxImportError(
        `${prefix}zone "${name}" is defined in another file (${where(def)}): import that file, which includes this one, or give --root ${root ?? dirname(dirname(self))} to read the definitions from the files under it`,
      );
    }
    throw new NginxImportError(
      `${prefix}no limit_req_zone defines zone "${name}" in the files read${root === undefined ? ", nor beside this file or one folder up: import the file that defines it (nginx.conf, which includes this one), or give --root DIR, a copy of the server's configuration tree" : ` nor under --root ${root}`}`,
    );
  }
  return { config: withDefinitions(config, added), report };
}

const same = (a: Directive, b: Directive) => a.file === b.file && a.line === b.line;

function usedZones(config: readonly Directive[]): Set<string> {
  const names = new Set<string>();
  walk(config, (d) => {
    if (d.name === "limit_req") for (const a of d.args) if (a.startsWith("zone=")) names.add(a.slice(5));
    if (d.name === "limit_conn" && d.args[0] !== undefined) names.add(d.args[0]);
  });
  return names;
}

function definedZones(config: readonly Directive[]): Set<string> {
  const names = new Set<string>();
  walk(config, (d) => {
    if (!ZONE_DEFINITIONS.has(d.name)) return;
    for (const a of d.args) {
      const m = /^zone=([^:]+):/.exec(a);
      if (m !== null) names.add(m[1]!);
    }
  });
  return names;
}

const definesZone = (d: Directive, name: string) => d.args.some((a) => a.startsWith(`zone=${name}:`));

function userOf(config: readonly Directive[], name: string): Directive | null {
  let found: Directive | null = null;
  walk(config, (d) => {
    const uses =
      d.name === "limit_req" ? d.args.includes(`zone=${name}`) : d.name === "limit_conn" && d.args[0] === name;
    if (found === null && uses) found = d;
  });
  return found;
}

function walk(block: readonly Directive[], visit: (d: Directive) => void): void {
  for (const d of block) {
    visit(d);
    if (d.block !== null) walk(d.block, visit);
  }
}

/** In the first file that defines zone `name`: its zone definitions, maps and geos (top level or in `http`). */
function definitionsIn(files: readonly string[], name: string): Directive[] | null {
  const pattern = new RegExp(`zone=${name.replace(/[^A-Za-z0-9_]/g, "\\$&")}:`);
  for (const f of files) {
    let text: string;
    try {
      text = readFileSync(f, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EACCES" || (err as NodeJS.ErrnoException).code === "EISDIR")
        continue;
      throw err;
    }
    if (!pattern.test(text)) continue;
    let parsed: Directive[];
    try {
      parsed = parseText(text, f);
    } catch (err) {
      // A file that is not NGINX's syntax (a template, a backup) only mentions the zone.
      if (err instanceof NginxSyntaxError) continue;
      throw err;
    }
    const top = [...parsed, ...parsed.filter((d) => d.name === "http").flatMap((d) => d.block ?? [])];
    const defs = top.filter((d) => BESIDE_ZONES.has(d.name));
    if (defs.some((d) => ZONE_DEFINITIONS.has(d.name) && definesZone(d, name))) return defs;
  }
  return null;
}

/** Configuration files under `dir` (depth folders down): `*.conf`, `nginx.conf`, and `sites-*` entries. */
function candidates(dir: string, depth: number): string[] {
  const out: string[] = [];
  const visit = (d: string, level: number) => {
    let names: string[];
    try {
      names = readdirSync(d).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT" || (err as NodeJS.ErrnoException).code === "EACCES") return;
      throw err;
    }
    for (const n of names) {
      if (out.length >= MAX_FILES) return;
      const full = join(d, n);
      const stat = statSync(full, { throwIfNoEntry: false });
      if (stat === undefined) continue;
      if (stat.isDirectory()) {
        if (level < depth && !n.startsWith(".") && n !== "node_modules") visit(full, level + 1);
      } else if (stat.isFile() && stat.size < 1_000_000 && (n.endsWith(".conf") || /^sites-/.test(basename(d)))) {
        out.push(resolve(full));
      }
    }
  };
  visit(dir, 0);
  return out;
}

/** `added` where the file's own zone definitions would be: inside its `http` block, or after its directives. */
function withDefinitions(config: readonly Directive[], added: readonly Directive[]): readonly Directive[] {
  if (added.length === 0) return config;
  const http = config.find((d) => d.name === "http" && d.block !== null);
  if (http === undefined) return [...config, ...added];
  return config.map((d) => (d === http ? { ...d, block: [...added, ...(d.block ?? [])] } : d));
}
