/** Progress on standard error: drawn on a terminal only, with lines, rate and time left, from an injected clock. */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { Progress, progressText } from "../../src/cli/progress.ts";

function stream(tty: boolean): { out: PassThrough & { isTTY?: boolean }; text: () => string } {
  const out: PassThrough & { isTTY?: boolean } = new PassThrough();
  if (tty) out.isTTY = true;
  const chunks: string[] = [];
  out.on("data", (c: Buffer) => chunks.push(c.toString()));
  return { out, text: () => chunks.join("") };
}

describe("progress", () => {
  it("says lines, rate, share read and time left", () => {
    expect(progressText("sluice compare", 1_200_000, 45, 100, 3000)).toBe(
      "sluice compare: 1,200,000 lines, 400,000 lines/s, 45% read, about 4 s left",
    );
    expect(progressText("sluice plan", 10, 0, null, 0)).toBe("sluice plan: 10 lines, 0 lines/s");
  });

  it("draws on a terminal at most twice a second, and clears its line at the end", async () => {
    let now = 0;
    const { out, text } = stream(true);
    const p = new Progress(out, "x", 1000, () => now);
    now = 600;
    p.update(100, 500);
    now = 700;
    p.update(200, 600);
    now = 1200;
    p.update(300, 700);
    p.done();
    await new Promise((r) => setImmediate(r));
    const drawn = text()
      .split("\r\x1b[2K")
      .filter((s) => s !== "");
    expect(drawn).toEqual([
      "x: 100 lines, 167 lines/s, 50% read, about 1 s left",
      "x: 300 lines, 250 lines/s, 70% read, about 1 s left",
    ]);
    expect(text().endsWith("\r\x1b[2K")).toBe(true);
  });

  it("writes nothing when standard error is not a terminal", async () => {
    const { out, text } = stream(false);
    const p = new Progress(out, "x", 1000, () => 10_000);
    p.update(100, 500);
    p.done();
    await new Promise((r) => setImmediate(r));
    expect(text()).toBe("");
  });
});
