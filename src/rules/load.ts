/**
 * Loading rule files from disk (CLI and build time only: the Worker gets the resolved rules as JSON and never
 * imports this module or `yaml`).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import type { DenyRule, ResolvedRule } from "./types.ts";
import { parseRules } from "./yaml.ts";

/**
 * Every rule in `paths`, each a file or a directory (then every `*.yaml` / `*.yml` in it, sorted by name; not
 * recursive). File names in messages are as given. A rule id defined in two files is an error in the later one.
 * All problems come back in `errors`; only valid rules are in `rules`, and deny rules (deny.ts) in `denies`.
 */
export function loadRules(paths: string[]): {
  rules: ResolvedRule[];
  denies: DenyRule[];
  errors: string[];
  /** Valid rules that are likely not what was meant (a key the client can rotate): printed, never fatal. */
  warnings: string[];
  files: { file: string; count: number }[];
} {
  const rules: ResolvedRule[] = [];
  const denies: DenyRule[] = [];
  const errors: string[] = [];
  const warnings: string[] = [];
  const files: { file: string; count: number }[] = [];
  const seenFiles = new Set<string>();
  const firstFile = new Map<string, string>();
  for (const file of expand(paths, errors)) {
    const absolute = resolve(file);
    if (seenFiles.has(absolute)) continue; // the same file reached twice (as itself and through its directory)
    seenFiles.add(absolute);
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      errors.push(`${file}: cannot read: ${reason(err)}`);
      continue;
    }
    const parsed = parseRules(text, file);
    errors.push(...parsed.errors);
    warnings.push(...parsed.warnings);
    let count = 0;
    const unique = (rule: { readonly id: string }) => {
      const first = firstFile.get(rule.id);
      if (first !== undefined) errors.push(`${file}: ${rule.id}.id: duplicate id (first defined in ${first})`);
      else firstFile.set(rule.id, file);
      if (first === undefined) count++;
      return first === undefined;
    };
    rules.push(...parsed.rules.filter(unique));
    denies.push(...parsed.denies.filter(unique));
    files.push({ file, count });
  }
  return { rules, denies, errors, warnings, files };
}

/** The files `paths` name: files as given, directories as their sorted `*.yaml` / `*.yml` files. */
function expand(paths: string[], errors: string[]): string[] {
  const out: string[] = [];
  for (const path of paths) {
    let isDirectory: boolean;
    try {
      isDirectory = statSync(path).isDirectory();
    } catch (err) {
      errors.push(`${path}: cannot read: ${reason(err)}`);
      continue;
    }
    if (!isDirectory) {
      out.push(path);
      continue;
    }
    const names = readdirSync(path)
      .filter((name) => /\.ya?ml$/.test(name))
      .sort();
    if (names.length === 0) errors.push(`${path}: no *.yaml or *.yml rule files in this directory`);
    for (const name of names) out.push(join(path, name));
  }
  return out;
}

function reason(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === "ENOENT") return "no such file or directory";
  if (code === "EACCES") return "permission denied";
  return err instanceof Error ? err.message : String(err);
}
