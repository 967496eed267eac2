/**
 * The e2e start-up probes' fetch (test/support/wrangler_dev.ts `fetchWithin`): a server that accepts a connection and
 * never answers, as wrangler dev's proxy holds requests while workerd starts, costs the probe its budget, not the run.
 */
import { createServer } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fetchWithin } from "../support/wrangler_dev.ts";

const silent = createServer(() => {}); // reads the request, never writes an answer
const answering = createServer((_, res) => res.writeHead(201, { "x-probe": "yes" }).end("made"));
let base = { silent: "", answering: "" };

beforeAll(async () => {
  const listen = (s: typeof silent) =>
    new Promise<string>((resolve) =>
      s.listen(0, "127.0.0.1", () => {
        const a = s.address();
        resolve(`http://127.0.0.1:${typeof a === "object" && a !== null ? a.port : 0}/`);
      }),
    );
  base = { silent: await listen(silent), answering: await listen(answering) };
});

afterAll(() => {
  silent.closeAllConnections();
  answering.closeAllConnections();
  silent.close();
  answering.close();
});

describe("fetchWithin", () => {
  it("rejects, naming the URL, when the server holds the request past the budget", async () => {
    await expect(fetchWithin(base.silent, 200)).rejects.toThrow(`${base.silent}: no answer within 200 ms`);
  });

  it("returns the status, headers and body of an answer within the budget", async () => {
    const r = await fetchWithin(base.answering, 5000, { method: "POST", body: "x" });
    expect([r.status, r.headers.get("x-probe"), r.text]).toEqual([201, "yes", "made"]);
  });
});
