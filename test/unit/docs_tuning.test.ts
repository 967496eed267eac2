/**
 * docs/production.md's tuning table of the hot-key tier: one row for every constant of src/protocol/tunables.ts (the
 * tier's one module of tunables), with its value, and no other, so the table cannot drift from what runs.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import * as tunables from "../../src/protocol/tunables.ts";

describe("docs/production.md, the hot-key tier's tuning table", () => {
  const doc = readFileSync(new URL("../../docs/production.md", import.meta.url), "utf8");
  const rows = new Map([...doc.matchAll(/^\| `([A-Z_]+)` \| (\d+) \|/gm)].map((m) => [m[1]!, Number(m[2])] as const));

  it("has a row for every constant of src/protocol/tunables.ts, with its value, and no other", () => {
    expect(Object.keys(tunables).length).toBeGreaterThan(20);
    expect(Object.fromEntries(rows)).toEqual({ ...tunables });
  });
});
