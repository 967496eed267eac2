/**
 * No way around a rule (issue 9), tried as an attacker would against the shipped rules: every spelling of a protected
 * path counts against its rule; genuinely different paths do not. HEAD spends a GET rule's budget and a method
 * override counts against the overriding method's rules too.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { RULES } from "../../src/generated/rules.ts";
import { compileRules } from "../../src/request/match.ts";
import { bodyOf, freshIp, freshKey, gatewayFetch, setNow, T0 } from "./helpers.ts";

afterEach(() => vi.useRealTimers());

const shipped = compileRules(RULES);

/** The rule ids that decided a request (the echo origin lists them). */
async function decidedBy(method: string, path: string, headers: Record<string, string>): Promise<string[]> {
  const r = await gatewayFetch(shipped, new Request(`https://sluice.test${path}`, { method, headers }));
  expect(r.status, `${method} ${path}`).toBe(200);
  return (await bodyOf(r)).decisions.map((d) => String(d.rule));
}

/** Spellings of `/v1/login` that upstreams route to the login handler. */
const LOGIN_SPELLINGS = [
  "/v1/login",
  "//v1/login",
  "/v1//login",
  "/v1/login/",
  "/v1/login//",
  "/v1/%6Cogin",
  "/v1/%6cogin",
  "/%76%31/%6C%6F%67%69%6E",
  "/V1/LOGIN",
  "/v1/Login",
  "/v1/LoG%49n",
  "/v1/login;jsessionid=x",
  "/v1;x=1/login",
  "/v1/login;",
  "/v1%2Flogin",
  "/v1%2flogin",
  "/v1/./login",
  "/v1/login/.",
  "/v1/x/../login",
  "/v1/x/%2e%2e/login",
  "/v1/x/%2E%2E/login",
  "/v1/x/.%2e/login",
  "/v1/x%2F..%2Flogin",
  "/v1/x/..;y=z/login",
  "/v1/%2e/login",
  "/../v1/login",
];

/** Paths that are not the login route, and must not spend its budget. */
const NOT_LOGIN = [
  "/v1/login-help",
  "/v1/logins",
  "/v1/log",
  "/v1",
  "/v1/login/x",
  "/v1/x/login",
  "/v2/login",
  "/v1/login%2Dx",
  "/v1%252Flogin", // double-encoded: decoded once it is the text "%2F", one segment, as upstreams decode it
  "/v1/login%3Bx", // an encoded ; is data: the segment is "login;x"
];

describe("bypass corpus: POST /v1/login (login-per-ip)", () => {
  it.each(LOGIN_SPELLINGS)("POST %s counts", async (path) => {
    setNow(T0);
    expect(await decidedBy("POST", path, { "CF-Connecting-IP": freshIp() })).toContain("login-per-ip");
  });

  it.each(NOT_LOGIN)("POST %s does not count", async (path) => {
    setNow(T0);
    expect(await decidedBy("POST", path, { "CF-Connecting-IP": freshIp() })).not.toContain("login-per-ip");
  });

  it("GET /v1/login does not count; GET with X-HTTP-Method-Override: POST does", async () => {
    setNow(T0);
    expect(await decidedBy("GET", "/v1/login", { "CF-Connecting-IP": freshIp() })).not.toContain("login-per-ip");
    for (const header of ["X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"]) {
      const ip = freshIp();
      expect(await decidedBy("GET", "/v1/login", { "CF-Connecting-IP": ip, [header]: "post" })).toContain(
        "login-per-ip",
      );
    }
  });

  it("a sixth attempt from one address is denied, whatever the spellings of the first five", async () => {
    setNow(T0);
    const ip = "192.0.2.77";
    for (const path of ["//v1/login", "/v1/%6Cogin", "/V1/LOGIN", "/v1/login;jsessionid=x", "/v1%2Flogin"]) {
      expect(await decidedBy("POST", path, { "CF-Connecting-IP": ip })).toContain("login-per-ip");
    }
    const sixth = await gatewayFetch(
      shipped,
      new Request("https://sluice.test/v1/x/../login/", { method: "POST", headers: { "CF-Connecting-IP": ip } }),
    );
    expect(sixth.status).toBe(429);
    expect((await bodyOf(sixth))["violated-policies"]).toEqual(["login-per-ip"]);
  });
});

describe("bypass corpus: GET /v1/public/** (anon-per-ip)", () => {
  it.each([
    ["GET", "/v1/public/quote"],
    ["HEAD", "/v1/public/quote"],
    ["GET", "/V1/Public/Quote"],
    ["GET", "/v1/%70ublic/quote"],
    ["GET", "//v1//public/quote"],
    ["GET", "/v1/public"],
    ["GET", "/v1/x/../public/a/b"],
    ["GET", "/v1%2Fpublic%2Fquote"],
    ["GET", "/v1/public;x/quote"],
  ])("%s %s counts", async (method, path) => {
    setNow(T0);
    const ids = await (async () => {
      const r = await gatewayFetch(
        shipped,
        new Request(`https://sluice.test${path}`, { method, headers: { "CF-Connecting-IP": freshIp() } }),
      );
      expect(r.status).toBe(200);
      // HEAD has no body to read the decisions from: the RateLimit header names the rules instead.
      return method === "HEAD" ? (r.headers.get("RateLimit") ?? "") : JSON.stringify((await bodyOf(r)).decisions);
    })();
    expect(ids).toContain("anon-per-ip");
  });

  it.each(["/v1/publics/quote", "/v1/publicx", "/v1", "/v2/public/quote"])("GET %s does not count", async (path) => {
    setNow(T0);
    expect(await decidedBy("GET", path, { "CF-Connecting-IP": freshIp() })).not.toContain("anon-per-ip");
  });
});

describe("bypass corpus: POST /v1/addresses/*/validate (address-validate-per-user)", () => {
  it.each([
    "/v1/addresses/a1/validate",
    "/v1/addresses/a1/validate/",
    "/V1/Addresses/A1/VALIDATE",
    "/v1/addresses//a1/validate",
    "/v1/addresses/a1/%76alidate",
    "/v1/addresses/a1/validate;x",
    "/v1/addresses/b/../a1/validate",
  ])("POST %s counts", async (path) => {
    setNow(T0);
    expect(await decidedBy("POST", path, { "X-User-Id": `u-${freshIp()}` })).toContain("address-validate-per-user");
  });

  it.each(["/v1/addresses/validate", "/v1/addresses/a1/b/validate", "/v1/addresses/a1/validated"])(
    "POST %s does not count",
    async (path) => {
      setNow(T0);
      expect(await decidedBy("POST", path, { "X-User-Id": `u-${freshIp()}` })).not.toContain(
        "address-validate-per-user",
      );
    },
  );
});

describe("bypass corpus: POST /v1/labels:batch (labels-bulk)", () => {
  it.each([
    "/v1/labels:batch",
    "/v1/labels%3Abatch",
    "/v1/LABELS:BATCH",
    "/v1//labels:batch/",
    "/v1/labels:batch;jsessionid=1",
  ])("POST %s counts, at cost 10", async (path) => {
    setNow(T0);
    const r = await gatewayFetch(
      shipped,
      new Request(`https://sluice.test${path}`, {
        method: "POST",
        headers: { "CF-Connecting-IP": freshIp(), Authorization: `Bearer ${freshKey()}` },
      }),
    );
    const decisions = (await bodyOf(r)).decisions;
    expect(decisions).toContainEqual(expect.objectContaining({ rule: "labels-bulk", cost: 10 }));
  });

  it.each([
    ["POST", "/v1/labels"],
    ["GET", "/v1/labels:batch"],
    ["POST", "/v1/labels:batches"],
    ["POST", "/v1/labels%3Bbatch"],
  ])("%s %s does not count", async (method, path) => {
    setNow(T0);
    const r = await gatewayFetch(
      shipped,
      new Request(`https://sluice.test${path}`, {
        method,
        headers: { "CF-Connecting-IP": freshIp(), Authorization: `Bearer ${freshKey()}` },
      }),
    );
    expect((await bodyOf(r)).decisions.map((d) => d.rule)).not.toContain("labels-bulk");
  });
});

describe("unreadable requests are refused before any rule", () => {
  it.each([
    ["POST", "/v1/%ZZlogin", {}],
    ["POST", "/v1/login%00", {}],
    ["POST", "/v1/%C3%28", {}],
    ["POST", "/v1/login", { "X-HTTP-Method-Override": "POST, GET" }],
  ])("%s %s %j: 400 problem+json", async (method, path, extra) => {
    setNow(T0);
    const r = await gatewayFetch(
      shipped,
      new Request(`https://sluice.test${path}`, { method, headers: { "CF-Connecting-IP": freshIp(), ...extra } }),
    );
    expect(r.status).toBe(400);
    expect(r.headers.get("Content-Type")).toBe("application/problem+json");
    expect(r.headers.get("RateLimit-Policy")).toBeNull();
    expect(await r.json()).toMatchObject({ type: "about:blank", title: "Bad Request", status: 400 });
  });
});
