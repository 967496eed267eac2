/**
 * A small Hono API on Sluice: every `/v1/*` request is checked against Sluice's whole rule set (plan, route,
 * identity, costs: what its gateway would do), and logins are counted per client address on one rule by key.
 * Refused requests get the gateway's answer (429 problem+json, Retry-After, RateLimit fields); admitted ones carry
 * the RateLimit fields too.
 */
import { Hono } from "hono";
import type { SluiceBinding } from "sluice/client";
import { sluice } from "sluice/hono";

type Bindings = { readonly SLUICE: SluiceBinding };

const app = new Hono<{ Bindings: Bindings }>();

app.post("/login", sluice({ rule: "login-per-ip", key: (c) => c.req.header("cf-connecting-ip") ?? "unknown" }), (c) =>
  c.json({ ok: true, login: "checked" }),
);

app.use("/v1/*", sluice());
app.get("/v1/quotes", (c) => c.json({ quotes: [{ carrier: "acme", cents: 1250 }] }));
app.post("/v1/labels:batch", (c) => c.json({ labels: 10 }));
app.get("/v1/public/*", (c) => c.json({ public: true, path: c.req.path }));

export default app;
