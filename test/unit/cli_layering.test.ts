/** The CLI's layering: no import cycles between its modules, and `viz` never imports from `cli`. */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/^(?:import|export)[^;]*?from "(\.[^"]+)"/gms)].map((m) => join(file, "..", m[1]!));
}

const tsFiles = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.endsWith(".ts"))
    .map((f) => join(dir, f));

describe("CLI layering", () => {
  it("src/viz imports nothing from src/cli", () => {
    for (const file of tsFiles("src/viz")) {
      expect(
        importsOf(file).filter((i) => i.startsWith("src/cli/")),
        file,
      ).toEqual([]);
    }
  });

  it("src/cli has no import cycles", () => {
    const graph = new Map(tsFiles("src/cli").map((f) => [f, importsOf(f).filter((i) => i.startsWith("src/cli/"))]));
    const cycles: string[] = [];
    const visit = (file: string, path: string[]) => {
      if (path.includes(file)) {
        cycles.push([...path.slice(path.indexOf(file)), file].join(" -> "));
        return;
      }
      for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
    };
    for (const file of graph.keys()) visit(file, []);
    expect(cycles).toEqual([]);
  });

  it("the cycle check sees an import (it is not vacuous)", () => {
    expect(importsOf("src/cli/main.ts")).toContain("src/cli/commands.ts");
  });
});
