/**
 * Upstream profiles and the request shape they give: `_method` per profile (query, form, neither), format suffixes,
 * ambiguous paths refused or forwarded as matched, and docs/rules.md's table naming every profile.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ambiguityOf, asciiLower, DEFAULT_PATH_OPTIONS } from "../../src/request/canonical_path.ts";
import { type ShapeOptions, shapeOf } from "../../src/request/request_shape.ts";
import {
  PROFILE_RULES,
  UPSTREAM_PROFILES,
  type UpstreamProfile,
  withoutFormatSuffix,
} from "../../src/request/upstream_profile.ts";

const options = (upstreamProfile: UpstreamProfile, ambiguousPaths: "refuse" | "forward" = "refuse"): ShapeOptions => ({
  path: DEFAULT_PATH_OPTIONS,
  ambiguousPaths,
  upstreamProfile,
});

async function shape(profile: UpstreamProfile, method: string, path: string, init: RequestInit = {}) {
  const request = new Request(`https://sluice.test${path}`, { method, ...init });
  return shapeOf(request, new URL(request.url), options(profile));
}

const form = (body: string): RequestInit => ({
  body,
  headers: { "Content-Type": "application/x-www-form-urlencoded", "Content-Length": String(body.length) },
});

describe("_method per profile", () => {
  it.each([
    ["any", "/v1/x?_method=DELETE", {}, ["POST", "DELETE"]],
    ["express", "/v1/x?_method=delete", {}, ["POST", "DELETE"]],
    ["laravel", "/v1/x?_method=PUT", {}, ["POST", "PUT"]],
    ["spring", "/v1/x?_method=PATCH", {}, ["POST", "PATCH"]],
    ["rails", "/v1/x?_method=DELETE", {}, ["POST"]], // Rack reads the form body only
    ["nginx", "/v1/x?_method=DELETE", {}, ["POST"]],
    ["go", "/v1/x?_method=DELETE", {}, ["POST"]],
    ["flask", "/v1/x?_method=DELETE", {}, ["POST"]],
    ["rails", "/v1/x", form("a=1&_method=delete"), ["POST", "DELETE"]],
    ["any", "/v1/x", form("_method=GET"), ["POST", "GET"]],
    ["express", "/v1/x", form("a=1"), ["POST"]],
    ["nginx", "/v1/x", form("_method=DELETE"), ["POST"]],
  ] as const)("%s: POST %s %j counts as %j", async (profile, path, init, methods) => {
    const s = await shape(profile, "POST", path, init);
    expect(s.ok && s.methods).toEqual(methods);
  });

  it("only a POST is read for _method", async () => {
    const s = await shape("any", "GET", "/v1/x?_method=DELETE");
    expect(s.ok && s.methods).toEqual(["GET"]);
  });

  it("a form body that cannot be read cheaply counts against every method _method can name", async () => {
    const multipart = { body: "x", headers: { "Content-Type": "multipart/form-data; boundary=b" } };
    const big = {
      body: "a",
      headers: { "Content-Type": "application/x-www-form-urlencoded", "Content-Length": "70000" },
    };
    for (const init of [multipart, big]) {
      const s = await shape("rails", "POST", "/v1/x", init);
      expect(s.ok && s.methods).toEqual(["POST", "GET", "PUT", "PATCH", "DELETE", "OPTIONS", "LINK", "UNLINK"]);
    }
  });

  it("the upstream still receives the whole body after _method was read", async () => {
    const request = new Request("https://sluice.test/v1/x", { method: "POST", ...form("_method=DELETE&z=9") });
    await shapeOf(request, new URL(request.url), options("rails"));
    expect(await request.text()).toBe("_method=DELETE&z=9");
  });

  it.each([
    ["/v1/x?_method=DELETE&_method=PUT", {}],
    ["/v1/x?_method=DEL%20ETE", {}],
    ["/v1/x?_method=DELETE", form("_method=PUT")],
  ] as const)("POST %s %j: 400, two or no readable methods", async (path, init) => {
    const s = await shape("any", "POST", path, init);
    expect(s).toMatchObject({ ok: false, error: "unreadable_request" });
  });
});

describe("format suffixes", () => {
  it.each([
    ["/v1/login.json", "/v1/login"],
    ["/v1/labels/42.pdf", "/v1/labels/42"],
    ["/v1/a.b.xml", "/v1/a.b"],
    ["/v1/login", null],
    ["/v1/.json", null],
    ["/v1/login.", null],
    ["/v1.json/login", null],
  ])("%s -> %s", (path, expected) => {
    expect(withoutFormatSuffix(path)).toBe(expected);
  });

  it("rails, spring and any count /x.json as /x too; the others do not", async () => {
    for (const profile of UPSTREAM_PROFILES) {
      const s = await shape(profile, "POST", "/v1/login.json");
      const paths = PROFILE_RULES[profile].formatSuffix ? ["/v1/login.json", "/v1/login"] : ["/v1/login.json"];
      expect(s.ok && s.paths, profile).toEqual(paths);
    }
  });
});

describe("ambiguous paths", () => {
  it.each([
    "/v1%2Flogin",
    "/v1/a;b%2F..%2Flogin",
    "/v1/a;b%2f..%2flogin",
    "/v1/a%5C..%5Clogin",
    "/_sluice%2fstats",
    "/v1/x/..;y/login",
    "/v1/%2e%2E;x/a",
    "/v1/.;x/login",
  ])("%s is ambiguous: refused by default", async (path) => {
    expect(ambiguityOf(path)).not.toBeNull();
    expect(await shape("any", "POST", path)).toMatchObject({ ok: false, error: "ambiguous_path" });
  });

  it.each(["/v1/login", "/v1%252Flogin", "/v1/login;x=1", "/v1/%2e%2e/login", "/v1/login%3B", "/v1/x;..", "/v1/...;x"])(
    "%s is not ambiguous",
    (path) => {
      expect(ambiguityOf(path)).toBeNull();
    },
  );

  it("PATH_KEEP_ENCODED_SLASH declares %2F data: not ambiguous; %5C still is", () => {
    const keep = { ...DEFAULT_PATH_OPTIONS, keepEncodedSlash: true };
    expect(ambiguityOf("/projects/a%2Fb", keep)).toBeNull();
    expect(ambiguityOf("/projects/a%5Cb", keep)).not.toBeNull();
  });

  it.each([
    ["/v1/a;b%2F..%2Flogin", "/v1/a", "/v1/a"],
    ["/V1%2FLogin;jsessionid=1", "/v1/login", "/V1/Login"],
    ["/v1/x%2F..%2Flogin/", "/v1/login", "/v1/login/"],
  ])("under forward, %s is counted as %s and forwarded as %s (what was matched)", async (path, counted, forwarded) => {
    const request = new Request(`https://sluice.test${path}`, { method: "POST" });
    const s = await shapeOf(request, new URL(request.url), options("any", "forward"));
    expect(s.ok && [s.path, s.forwardPath]).toEqual([counted, forwarded]);
  });
});

describe("ASCII-only case folding", () => {
  it("folds A-Z and nothing else", () => {
    expect(asciiLower("ABC-xyz")).toBe("abc-xyz");
    expect(asciiLower("\u212A")).toBe("\u212A"); // the Kelvin sign is not k
    expect(asciiLower("\u00C9")).toBe("\u00C9");
    expect(asciiLower("\u0130")).toBe("\u0130");
  });
});

describe("docs/rules.md", () => {
  it("the upstream table names every profile", () => {
    const doc = readFileSync("docs/rules.md", "utf8");
    const table = doc.slice(doc.indexOf("### Your upstream"), doc.indexOf("## Who counts as the same caller"));
    for (const profile of UPSTREAM_PROFILES) expect(table, profile).toContain(`| \`${profile}\``);
  });
});
