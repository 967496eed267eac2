/**
 * Differential route fuzzing (issues 23, 35): random spellings of the shipped rules' routes, some of them `POST`s whose
 * body names another method in `_method` (bodies.ts), sent to a real NGINX (Debian's package) whose locations are
 * those routes, to a real Express 5 app with the same routes and method-override 3, and to models of Spring MVC 5.3 and
 * Rails 7.1 routing (framework_models.ts, checked on known cases before the run). Whenever a router dispatches a
 * request to a protected handler, Sluice (its pure request reading: the URL as the Workers runtime parses it, the
 * canonical path, the upstream profile, the body's `_method`, route matching and every refusal), under profile `any`
 * and under the router's own profile, must count that request against the handler's rule or refuse it. An admin path
 * (`/_sluice`) must be the admin API or refused, never forwarded.
 *
 * Each router is asked about three spellings of every generated request:
 * - `seen`: the path and query as the Worker sees them (`request.url`). The Workers runtime parses the request target
 *   with the WHATWG URL parser before any Worker code runs (checked against wrangler dev: `/v1\login` arrives as
 *   `/v1/login`, `/a/x/%2e%2e/b` as `/a/b`), so this is the request Sluice decides on. Disagreements fail the run.
 * - `forwarded`: the path Sluice sends upstream, when it forwards. Disagreements fail the run.
 * - `sent`: the bytes the client wrote. No upstream behind Sluice ever receives them (Sluice forwards its own path),
 *   but a router reading them differently from the runtime's parser is worth knowing: counted and shown as notes
 *   (the first 20), not failures.
 * Every disagreement is printed (the first 200); the exit status is 1 if there was one.
 *
 *   npm run test:fuzz-routes -- [--seed N] [--count 100000] [--concurrency 32]
 *
 * Not part of `npm test` (it runs for minutes); run it under `flock /tmp/sluice-heavy.lock` on a shared machine.
 * NGINX locations answer with `return 200 "<route id> $request_method"`: the location NGINX picks is what is compared, and no
 * `limit_req` is involved here (TOOLCHAIN.md: `return` runs before `limit_req`, which is why the NGINX rate
 * differential serves a file instead).
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import express from "express";
import { freePort } from "../../scripts/free-port.mjs";
import { mulberry32 } from "../../src/cli/gen_streams.ts";
import { RULES } from "../../src/generated/rules.ts";
import { adminReading, isAdminPath } from "../../src/request/admin_path.ts";
import { DEFAULT_PATH_OPTIONS } from "../../src/request/canonical_path.ts";
import { foldRoute } from "../../src/request/match.ts";
import { shapeOf } from "../../src/request/request_shape.ts";
import type { UpstreamProfile } from "../../src/request/upstream_profile.ts";
import { compileRoute, routeMatches } from "../../src/rules/route.ts";
import type { RoutePattern } from "../../src/rules/types.ts";
import { type FuzzBody, fuzzBody, useMethodOverride } from "./bodies.ts";
import { railsDispatch, springDispatch } from "./framework_models.ts";

const { values: args } = parseArgs({
  options: {
    seed: { type: "string", default: "1" },
    count: { type: "string", default: "100000" },
    concurrency: { type: "string", default: "32" },
  },
});
const SEED = Number(args.seed);
const COUNT = Number(args.count);
const CONCURRENCY = Number(args.concurrency);

// --- the protected routes: every route of the shipped rules, and the admin API ----------------------------------

interface Protected {
  /** The handler's name, answered by both routers. */
  readonly id: string;
  readonly source: string;
  readonly method: string;
  /** Path segments of the pattern (`*` one segment, a last `**` any rest). */
  readonly segments: readonly string[];
  readonly pattern: RoutePattern;
}

function protectedRoutes(): Protected[] {
  const sources = new Set<string>();
  for (const rule of RULES) {
    if (rule.match.route !== null) sources.add(rule.match.route.source);
    for (const entry of rule.costByRoute) sources.add(entry.route.source);
  }
  return [...sources].map((source, i) => {
    const [method, path] = source.split(" ") as [string, string];
    const pattern = compileRoute(source);
    if ("error" in pattern) throw new Error(`${source}: ${pattern.error}`);
    return { id: `r${i}`, source, method, segments: path.split("/").slice(1), pattern: foldRoute(pattern) };
  });
}

const ROUTES = protectedRoutes();
const ADMIN = "admin";

// --- NGINX -------------------------------------------------------------------------------------------------------

function nginxLocations(routes: readonly Protected[]): string {
  const out: string[] = [];
  for (const r of routes) {
    const last = r.segments[r.segments.length - 1];
    const literal = r.segments.every((s) => s !== "*" && s !== "**");
    const answer = `{ return 200 "${r.id} $request_method"; }`;
    if (literal) {
      out.push(`location = /${r.segments.join("/")} ${answer}`);
    } else if (last === "**" && r.segments.slice(0, -1).every((s) => s !== "*")) {
      const base = `/${r.segments.slice(0, -1).join("/")}`;
      out.push(`location = ${base} ${answer}`, `location ${base}/ ${answer}`);
    } else {
      const body = r.segments
        .map((s) => (s === "*" ? "[^/]+" : s === "**" ? ".*" : s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
        .join("/");
      out.push(`location ~ "^/${body}/?$" ${answer}`);
    }
  }
  out.push(`location = /_sluice { return 200 "${ADMIN}"; }`, `location /_sluice/ { return 200 "${ADMIN}"; }`);
  out.push(`location / { return 200 "none"; }`);
  return out.map((l) => `    ${l}`).join("\n");
}

async function startNginx(dir: string, port: number): Promise<ChildProcess> {
  const which = spawnSync("sh", ["-c", "command -v nginx"], { encoding: "utf8" });
  if (which.status !== 0) {
    console.error(
      "nginx is not installed. On Debian/Ubuntu: apt-get update && apt-get install -y nginx (1.22 was used); then run again.",
    );
    process.exit(2);
  }
  for (const sub of ["tmp", "logs"]) mkdirSync(join(dir, sub), { recursive: true });
  const conf = `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  default_type text/plain;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:${port};
${nginxLocations(ROUTES)}
  }
}
`;
  writeFileSync(join(dir, "nginx.conf"), conf);
  const child = spawn("nginx", ["-p", dir, "-c", join(dir, "nginx.conf"), "-g", "daemon off;"], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  await waitForPort(port);
  return child;
}

async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const req = http.get({ host: "127.0.0.1", port, path: "/" }, (res) => {
        res.resume();
        resolve(true);
      });
      req.on("error", () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing answers on 127.0.0.1:${port}`);
}

// --- Express -----------------------------------------------------------------------------------------------------

/** The route as an Express 5 path (path-to-regexp 8): `*` a parameter, `**` an optional wildcard, `:` escaped. */
function expressPaths(r: Protected): string[] {
  const esc = (s: string) => s.replace(/[:()[\]{}*?+!\\]/g, (c) => `\\${c}`);
  const parts = r.segments.map((s, i) => (s === "*" ? `:p${i}` : s === "**" ? "*rest" : esc(s)));
  if (r.segments[r.segments.length - 1] === "**") {
    return [`/${parts.slice(0, -1).join("/")}`, `/${parts.join("/")}`];
  }
  return [`/${parts.join("/")}`];
}

async function startExpress(port: number): Promise<http.Server> {
  const app = express();
  useMethodOverride(app, express);
  for (const r of ROUTES) {
    const method = r.method === "*" ? "all" : (r.method.toLowerCase() as "get" | "post" | "put" | "delete" | "patch");
    app[method](expressPaths(r), (req, res) => {
      res.type("text/plain").send(`${r.id} ${req.method}`);
    });
  }
  app.all(["/_sluice", "/_sluice/*rest"], (_req, res) => {
    res.type("text/plain").send(ADMIN);
  });
  app.use((_req, res) => {
    res.type("text/plain").send("none");
  });
  app.use((_error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(400).type("text/plain").send("error");
  });
  return new Promise((resolve) => {
    const server = app.listen(port, "127.0.0.1", () => resolve(server));
  });
}

// --- seeded generation of path spellings -------------------------------------------------------------------------

const random = mulberry32(SEED);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
const chance = (p: number) => random() < p;

/** Concrete paths, as segments: each protected route's instances, near misses, and the admin API. */
function basePaths(): { readonly method: string; readonly segments: string[] }[] {
  const out: { method: string; segments: string[] }[] = [];
  for (const r of ROUTES) {
    const fill = (s: string) => (s === "*" ? pick(["a1", "x", "42", "A-b"]) : s);
    const concrete = r.segments.flatMap((s) => (s === "**" ? (chance(0.5) ? [] : ["quote", "a"]) : [fill(s)]));
    out.push({ method: r.method === "*" ? "GET" : r.method, segments: concrete });
  }
  out.push({ method: "GET", segments: ["_sluice", pick(["rules", "stats", "state", ""])] });
  return out;
}

const LOOKALIKES: Record<string, string[]> = {
  k: ["\u212A"], // Kelvin sign
  s: ["\u017F"], // long s
  i: ["\u0131", "\u0130"], // dotless i, dotted capital I
  a: ["\uFF41"], // fullwidth
  l: ["\uFF4C", "\u217C"],
  _: ["\uFF3F"],
};

function hex(c: string, lower: boolean): string {
  return [...new TextEncoder().encode(c)]
    .map((b) => `%${b.toString(16).padStart(2, "0")}`)
    .map((h) => (lower ? h.toLowerCase() : h.toUpperCase()))
    .join("");
}

function spellSegment(seg: string): string {
  let out = "";
  for (const c of seg) {
    const roll = random();
    if (roll < 0.12) out += hex(c, chance(0.5));
    else if (roll < 0.22) out += chance(0.5) ? c.toUpperCase() : c.toLowerCase();
    else if (roll < 0.25 && LOOKALIKES[c.toLowerCase()] !== undefined) out += pick(LOOKALIKES[c.toLowerCase()]!);
    else if (roll < 0.26)
      out += hex(hex(c, true), true); // double-encoded
    else out += c;
  }
  return out;
}

const JUNK = ["x", "a;b", "..", ".", "%2e%2e", ".%2E", "%2E.", "jsessionid=1", "v=2", "%2F..%2F", "..%2F..", "%5C.."];
const SEPARATORS = ["/", "/", "/", "/", "//", "%2F", "%2f", "%5C", "\\", "/./", "/%2e/", "/;/"];

const SUFFIXES = [".", ".json", ".tar.gz", ".x-y", ".abcdefghijklmnopq", "..json", ".j%73on", "%2Ejson", ".json/"];

interface Generated {
  readonly method: string;
  readonly target: string;
  /** A `POST` body naming a method in `_method`, or `null`. */
  readonly body: FuzzBody | null;
}

/** One random spelling of a path, the method sent with it, and sometimes a body that names another method. */
function spelling(): Generated {
  const base = pick(basePaths());
  const segs = base.segments.map((s) => spellSegment(s));
  const parts: string[] = [];
  for (let i = 0; i < segs.length; i++) {
    let s = segs[i]!;
    const roll = random();
    if (roll < 0.1) s = `${s};${pick(JUNK)}`;
    else if (roll < 0.15) s = `${pick(["x", "..", "a%2Fb", "Y;z"])}/${pick(["..", "%2e%2e", ".%2e", "..;q"])}/${s}`;
    else if (roll < 0.19) s = `${pick([".", "%2e", ".;x"])}/${s}`;
    else if (roll < 0.22) s = `${s}${pick([".json", ".xml", "%2Ejson", "~", "%20", "%00", "!"])}`;
    else if (roll < 0.25) {
      // Climb out of another route's prefix.
      const other = pick(ROUTES).segments.filter((x) => x !== "**" && x !== "*");
      s = `${other.join("/")}/${other.map(() => pick(["..", "%2e%2e", "..;x"])).join("/")}/${s}`;
    }
    parts.push(s);
  }
  let path = "";
  for (let i = 0; i < parts.length; i++) {
    path += i === 0 ? pick(["/", "/", "/", "//", "/./", "/../", "\\", "/%2F", "/%2e/"]) : pick(SEPARATORS);
    path += parts[i];
  }
  if (path === "") path = "/";
  // Format suffixes as Spring (anything after the dot, nothing included) and Rails (`[^/.?]+`) route them.
  if (chance(0.12)) path += pick(SUFFIXES);
  if (chance(0.15)) path += pick(["/", "//", "/.", "/..", ";", "%2F", "?a=1", "?_method=GET"]);
  if (chance(0.3)) {
    const named = chance(0.7) ? base.method : pick(["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "LINK"]);
    return { method: "POST", target: path, body: fuzzBody(named, pick) };
  }
  const method = chance(0.8) ? base.method : pick(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"]);
  return { method, target: path, body: null };
}

// --- Sluice's reading of a request (pure; what the Worker does before any limiter is asked) ---------------------

type SluiceVerdict =
  | { readonly kind: "refused"; readonly why: string }
  | { readonly kind: "admin" }
  | { readonly kind: "counted"; readonly routes: ReadonlySet<string>; readonly forward: string };

async function sluiceReads(
  method: string,
  target: string,
  body: FuzzBody | null,
  profile: UpstreamProfile,
): Promise<SluiceVerdict> {
  let url: URL;
  try {
    // The Workers runtime hands the Worker `request.url` as the WHATWG URL parser reads origin + request target (a
    // target starting `//` is a path there, not an authority).
    url = new URL(`https://sluice.test${target}`);
  } catch {
    return { kind: "refused", why: "the URL does not parse" };
  }
  if (isAdminPath(url.pathname)) return { kind: "admin" };
  if (adminReading(url.pathname)) return { kind: "refused", why: "admin_path_spelling" };
  const headers = new Headers();
  if (body?.contentType != null) headers.set("content-type", body.contentType);
  if (body?.contentEncoding != null) headers.set("content-encoding", body.contentEncoding);
  if (body !== null) headers.set("content-length", String(body.bytes.length));
  const request = new Request(url, { method, headers, body: body === null ? null : new Uint8Array(body.bytes) });
  const shape = await shapeOf(request, url, {
    path: DEFAULT_PATH_OPTIONS,
    ambiguousPaths: "refuse",
    upstreamProfile: profile,
  });
  if (!shape.ok) return { kind: "refused", why: shape.error };
  const routes = new Set<string>();
  for (const r of ROUTES) {
    if (shape.methods.some((m) => shape.paths.some((p) => routeMatches(r.pattern, m, p)))) routes.add(r.id);
  }
  return { kind: "counted", routes, forward: shape.forwardPath + url.search };
}

/** The request target as the Worker sees it (see the module comment), or `null` when the URL does not parse. */
function seenTarget(target: string): string | null {
  try {
    const url = new URL(`https://sluice.test${target}`);
    return url.pathname + url.search;
  } catch {
    return null;
  }
}

// --- sending ----------------------------------------------------------------------------------------------------

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

/** The handler a router dispatched to (its body when it answered 200), or `"none"`. */
function dispatch(port: number, method: string, target: string, body: FuzzBody | null): Promise<string> {
  return new Promise((resolve) => {
    let path: string;
    try {
      // Node writes the request line as latin1: UTF-8 bytes go out as they are.
      path = Buffer.from(target, "utf8").toString("latin1");
    } catch {
      resolve("none");
      return;
    }
    const headers: Record<string, string> = {};
    if (body?.contentType != null) headers["content-type"] = body.contentType;
    if (body?.contentEncoding != null) headers["content-encoding"] = body.contentEncoding;
    const req = http.request({ host: "127.0.0.1", port, method, path, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve(res.statusCode === 200 ? Buffer.concat(chunks).toString() : "none"));
      res.on("error", () => resolve("none"));
    });
    req.on("error", () => resolve("none"));
    req.end(body?.bytes);
  });
}

/**
 * The protected route a router's answer (`"<route id> <method it ran as>"`) ran, when the route is for that method
 * (`HEAD` is `GET`; NGINX locations take any method, so its answer names the request's own method).
 */
function handlerRoute(answer: string): Protected | "admin" | null {
  if (answer === ADMIN) return "admin";
  const [id, ran] = answer.split(" ");
  const r = ROUTES.find((x) => x.id === id);
  if (r === undefined || ran === undefined) return null;
  const m = ran === "HEAD" ? "GET" : ran;
  return r.method === "*" || r.method === m ? r : null;
}

/** The routers compared, each with the upstream profile Sluice has for it (checked besides `any`). */
const ROUTERS = ["nginx", "express", "spring", "rails"] as const;
type Router = (typeof ROUTERS)[number];
const PROFILE: { readonly [R in Router]: UpstreamProfile } = {
  nginx: "nginx",
  express: "express",
  spring: "spring",
  rails: "rails",
};

interface Tally {
  generated: number;
  withBody: number;
  httpRequests: number;
  refused: number;
  admin: number;
  counted: number;
  protectedDispatches: Record<Router, number>;
  disagreements: number;
  notes: number;
}

const said = (v: SluiceVerdict) => (v.kind === "counted" ? `counted [${[...v.routes].join(",")}]` : v.kind);

/** Whether Sluice's verdict covers a router running `route`: refused, the admin API as such, or the route counted. */
function covers(verdict: SluiceVerdict, route: Protected | "admin"): boolean {
  if (verdict.kind === "refused") return true;
  return route === "admin" ? verdict.kind === "admin" : verdict.kind === "counted" && verdict.routes.has(route.id);
}

// long: the run's setup, one generated request's comparison, and the report, in the order they happen
/**
 * The models route the cases their frameworks' documentation and sources state (a model that routed nothing would
 * never disagree): checked before the run.
 */
function checkModels(): void {
  const id = (source: string) => ROUTES.find((r) => r.source === source)!.id;
  const login = id("POST /v1/login");
  const publicGet = id("GET /v1/public/**");
  const form = { contentType: "application/x-www-form-urlencoded", contentEncoding: null };
  const cases: [string, string, string][] = [
    ["spring", springDispatch(ROUTES, "POST", "/v1/login.tar.gz", null), `${login} POST`],
    ["spring", springDispatch(ROUTES, "POST", "/v1/login.", null), `${login} POST`],
    ["spring", springDispatch(ROUTES, "POST", "/v1/log%69n;jsessionid=1/", null), `${login} POST`],
    ["spring", springDispatch(ROUTES, "POST", "/v1/login%2Fx", null), "none"],
    ["spring", springDispatch(ROUTES, "POST", "/v1/public/a?_method=get", null), "none"],
    ["spring", springDispatch(ROUTES, "POST", "/v1/login?_method=delete", null), "none"],
    ["rails", railsDispatch(ROUTES, "POST", "/v1/login.x-y", null), `${login} POST`],
    ["rails", railsDispatch(ROUTES, "POST", "/v1/login.", null), "none"],
    ["rails", railsDispatch(ROUTES, "POST", "/v1/login.tar.gz", null), "none"],
    ["rails", railsDispatch(ROUTES, "POST", "/v1//login/", null), `${login} POST`],
    ["rails", railsDispatch(ROUTES, "POST", "/v1/log%69n", null), "none"],
    [
      "rails",
      railsDispatch(ROUTES, "POST", "/v1/public/a", { ...form, bytes: Buffer.from("_method=get") }),
      `${publicGet} GET`,
    ],
    [
      "rails",
      railsDispatch(ROUTES, "POST", "/v1/public/a", {
        contentType: null,
        contentEncoding: null,
        bytes: Buffer.from("_method=GET"),
      }),
      `${publicGet} GET`,
    ],
  ];
  const wrong = cases.filter(([, got, want]) => got !== want);
  if (wrong.length > 0) throw new Error(`router models: ${JSON.stringify(wrong)}`);
}

async function main(): Promise<void> {
  checkModels();
  const started = performance.now();
  const dir = mkdtempSync(join(tmpdir(), "sluice-fuzz-"));
  const nginxPort = await freePort();
  const expressPort = await freePort([nginxPort]);
  const nginx = await startNginx(dir, nginxPort);
  const server = await startExpress(expressPort);
  const ports = { nginx: nginxPort, express: expressPort } as const;
  const tally: Tally = {
    generated: 0,
    withBody: 0,
    httpRequests: 0,
    refused: 0,
    admin: 0,
    counted: 0,
    protectedDispatches: { nginx: 0, express: 0, spring: 0, rails: 0 },
    disagreements: 0,
    notes: 0,
  };
  const cache = new Map<string, string>();
  const ask = async (router: Router, method: string, target: string, body: FuzzBody | null) => {
    if (router === "spring") return springDispatch(ROUTES, method, target, body);
    if (router === "rails") return railsDispatch(ROUTES, method, target, body);
    // NGINX never reads a body: its location depends on the path alone.
    const sent = router === "nginx" ? null : body;
    const k = `${router} ${method} ${target} ${sent?.label ?? ""}`;
    const hit = cache.get(k);
    if (hit !== undefined) return hit;
    tally.httpRequests++;
    const handler = await dispatch(ports[router], method, target, sent);
    if (cache.size < 2_000_000 && (sent === null || sent.bytes.length < 4096)) cache.set(k, handler);
    return handler;
  };

  const one = async () => {
    const { method, target, body } = spelling();
    tally.generated++;
    if (body !== null) tally.withBody++;
    const verdicts = new Map<UpstreamProfile, SluiceVerdict>();
    for (const profile of ["any", ...Object.values(PROFILE)] as const)
      verdicts.set(profile, await sluiceReads(method, target, body, profile));
    const verdict = verdicts.get("any")!;
    tally[verdict.kind]++;
    const targets: ["sent" | "seen" | "forwarded", string][] = [["sent", target]];
    const seen = seenTarget(target);
    if (seen !== null) targets.push(["seen", seen]);
    if (verdict.kind === "counted") targets.push(["forwarded", verdict.forward]);
    const asked = new Set<string>();
    for (const [which, path] of targets) {
      if (which !== "sent" && asked.has(path)) continue;
      asked.add(path);
      for (const router of ROUTERS) {
        const route = handlerRoute(await ask(router, method, path, body));
        if (route === null) continue;
        if (which !== "sent") tally.protectedDispatches[router]++;
        for (const profile of ["any", PROFILE[router]] as const) {
          const v = verdicts.get(profile)!;
          if (covers(v, route)) continue;
          const handler = route === "admin" ? "the admin API" : route.source;
          const line =
            `seed=${SEED} ${router} ran ${handler} for ${method} ${JSON.stringify(path)} (${which}; ` +
            `sent ${JSON.stringify(target)}, seen ${JSON.stringify(seen)}` +
            `${body === null ? "" : `; body ${body.label}`}); Sluice (profile ${profile}): ${said(v)}`;
          if (which === "sent") {
            tally.notes++;
            if (tally.notes <= 20) console.log(`NOTE (never reaches an upstream) ${line}`);
          } else {
            tally.disagreements++;
            if (tally.disagreements <= 200) console.log(`DISAGREE ${line}`);
          }
          break;
        }
      }
    }
  };

  let next = 0;
  const workers = Array.from({ length: CONCURRENCY }, async () => {
    while (next < COUNT) {
      next++;
      await one();
    }
  });
  try {
    await Promise.all(workers);
  } finally {
    agent.destroy();
    server.close();
    nginx.kill("SIGQUIT");
  }
  const seconds = (performance.now() - started) / 1000;
  const errorLog = readFileSync(join(dir, "logs", "error.log"), "utf8")
    .split("\n")
    .filter((l) => l.includes("[emerg]"));
  rmSync(dir, { recursive: true, force: true });
  console.log(
    JSON.stringify({
      seed: SEED,
      routes: ROUTES.map((r) => r.source),
      generated: tally.generated,
      with_body: tally.withBody,
      http_requests: tally.httpRequests,
      sluice: { counted: tally.counted, refused: tally.refused, admin: tally.admin },
      protected_dispatches: tally.protectedDispatches,
      disagreements: tally.disagreements,
      notes_sent_spelling_only: tally.notes,
      seconds: Math.round(seconds * 10) / 10,
      nginx_emerg: errorLog,
    }),
  );
  process.exit(tally.disagreements === 0 ? 0 : 1);
}

await main();
