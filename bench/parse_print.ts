/**
 * The simulator's baseline: read the same CSV trace streaming and print the same JSON line shape, without deciding
 * (fixed decision fields). `sluice simulate` minus the algorithm and the state map, roughly: what I/O and parsing cost.
 * Usage: node --import tsx bench/parse_print.ts TRACE.csv > /dev/null
 */
import { createReadStream } from "node:fs";

async function main(path: string): Promise<void> {
  const stream = createReadStream(path, { highWaterMark: 1 << 20, encoding: "utf8" });
  let rest = "";
  let out = "";
  let first = true;
  const flush = async () => {
    if (!process.stdout.write(out)) await new Promise<void>((resolve) => process.stdout.once("drain", () => resolve()));
    out = "";
  };
  for await (const chunk of stream as AsyncIterable<string>) {
    const text = rest + chunk;
    let start = 0;
    for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n", start)) {
      const line = text.slice(start, nl);
      start = nl + 1;
      if (first) {
        first = false;
        if (line.startsWith("t_ms")) continue;
      }
      const c1 = line.indexOf(",");
      const c2 = line.indexOf(",", c1 + 1);
      const tMs = Number(line.slice(0, c1));
      const key = c2 < 0 ? line.slice(c1 + 1) : line.slice(c1 + 1, c2);
      const cost = c2 < 0 ? 1 : Number(line.slice(c2 + 1));
      out += `{"t_ms":${tMs},"key":${JSON.stringify(key)},"cost":${cost},"allowed":true,"remaining":0,"reset_after_ms":0,"retry_after_ms":null,"delay_ms":0}\n`;
      if (out.length >= 1 << 16) await flush();
    }
    rest = text.slice(start);
  }
  await flush();
}

const path = process.argv[2];
if (path === undefined) throw new Error("usage: parse_print.ts TRACE.csv");
await main(path);
