/**
 * What counts as the same path: the canonical form as tables (every bypass spelling of issue 9, and paths that must
 * stay distinct), unreadable paths, the relaxations, the forwarded form, and fast-check properties (random equivalent
 * spellings of a path still match its route; the canonical form is idempotent).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalPath, DEFAULT_PATH_OPTIONS, forwardedPath } from "../../src/request/canonical_path.ts";
import { foldRoute } from "../../src/request/match.ts";
import { compileRoute, routeMatches } from "../../src/rules/route.ts";
import type { RoutePattern } from "../../src/rules/types.ts";

const canon = (p: string, options = DEFAULT_PATH_OPTIONS) => {
  const r = canonicalPath(p, options);
  if (!r.ok) throw new Error(r.error);
  return r.path;
};

describe("canonicalPath", () => {
  it.each([
    ["/v1/login", "/v1/login"],
    ["//v1/login", "/v1/login"],
    ["/v1//login///", "/v1/login"],
    ["/v1/%6Cogin", "/v1/login"],
    ["/v1/%6cOGIN", "/v1/login"],
    ["/V1/LOGIN", "/v1/login"],
    ["/v1/login;jsessionid=x", "/v1/login"],
    ["/v1;a=b/login;c", "/v1/login"],
    ["/v1%2Flogin", "/v1/login"],
    ["/v1%2flogin", "/v1/login"],
    ["/v1/./login", "/v1/login"],
    ["/v1/x/../login", "/v1/login"],
    ["/v1/x/%2e%2E/login", "/v1/login"],
    ["/v1/x%2F..%2Flogin", "/v1/login"],
    ["/v1/%2e/login/", "/v1/login"],
    ["/../../v1/login", "/v1/login"],
    ["/v1/labels%3Abatch", "/v1/labels:batch"],
    ["/v1/login%3Bx", "/v1/login%3bx"], // an encoded ; is data, not a parameter
    ["/v1%252Flogin", "/v1%252flogin"], // decoded once: the literal text %2F, inside the segment
    ["/caf%C3%A9", "/café"],
    ["/", "/"],
    ["", "/"],
    ["/..", "/"],
  ])("%j -> %j", (input, expected) => {
    expect(canon(input)).toBe(expected);
  });

  it.each([
    ["/v1/%zzlogin", 'malformed percent escape "%zz"'],
    ["/v1/login%", 'malformed percent escape "%"'],
    ["/v1/login%4", 'malformed percent escape "%4"'],
    ["/v1/%00login", "the path contains %00"],
    ["/v1/%C3%28", "the path's percent escapes are not UTF-8"],
    ["/v1/%FF", "the path's percent escapes are not UTF-8"],
    ["/v1/%ED%A0%80", "the path's percent escapes are not UTF-8"], // a lone surrogate
  ])("%j cannot be read: %s", (input, error) => {
    expect(canonicalPath(input)).toEqual({ ok: false, error });
  });

  it("each relaxation keeps what it names, and only that", () => {
    const o = DEFAULT_PATH_OPTIONS;
    expect(canon("/V1/Login;x", { ...o, caseSensitive: true })).toBe("/V1/Login");
    expect(canon("/v1%2Flogin", { ...o, keepEncodedSlash: true })).toBe("/v1%2flogin");
    expect(canon("/V1%2F..%2Flogin", { ...o, keepEncodedSlash: true, caseSensitive: true })).toBe("/V1%2F..%2Flogin");
    expect(canon("/v1/login;jsessionid=x", { ...o, keepParams: true })).toBe("/v1/login%3bjsessionid=x");
  });
});

describe("forwardedPath", () => {
  it.each([
    ["/v1/login", "/v1/login"],
    ["//v1//login", "/v1/login"],
    ["/v1/./x/../login/", "/v1/login/"],
    ["/v1/x/%2E%2e/login", "/v1/login"],
    ["/v1/%6Cogin", "/v1/login"],
    ["/v1/Labels/AbC-123", "/v1/Labels/AbC-123"], // case-sensitive ids stay as sent
    ["/v1/login;jsessionid=x", "/v1/login;jsessionid=x"],
    ["/v1%2flogin", "/v1/login"],
    ["/a%2fb/..", "/a"],
    ["/v1/x/..;jsessionid=1/login", "/v1/login"],
    ["/v1/login;a%2Fb", "/v1/login;a%2Fb"],
    ["/a%20b/%7e", "/a%20b/~"],
    ["/", "/"],
    ["/..", "/"],
  ])("%j -> %j", (input, expected) => {
    expect(forwardedPath(input)).toBe(expected);
  });

  it("keeps an encoded slash with PATH_KEEP_ENCODED_SLASH", () => {
    const keep = { ...DEFAULT_PATH_OPTIONS, keepEncodedSlash: true };
    expect(forwardedPath("/projects/group%2fproject/./x", keep)).toBe("/projects/group%2Fproject/x");
  });

  it("counts as what was matched: the canonical form of the forwarded path is the request's", () => {
    for (const p of ["/v1//x/../%6Cogin;a", "/V1/./Labels%3Abatch/", "/a/%2e%2e/b/c%2Fd"]) {
      expect(canon(forwardedPath(p))).toBe(canon(p));
    }
  });
});

// --- properties -------------------------------------------------------------------------------------------------

const SEGMENT_CHARS = "abcxyzABCXYZ0189-_~:@!$&'()+,=".split("");
const segmentArb = fc
  .array(fc.constantFrom(...SEGMENT_CHARS, "."), { minLength: 1, maxLength: 6 })
  .map((cs) => cs.join(""))
  .filter((s) => s !== "." && s !== "..");

/** A route pattern and a concrete path it matches, as segments. */
const routeAndPathArb = fc
  .array(fc.oneof({ weight: 4, arbitrary: segmentArb }, { weight: 1, arbitrary: fc.constant("*") }), {
    maxLength: 5,
  })
  .chain((segs) =>
    fc.record({
      pattern: fc.constant(segs),
      doubleStar: fc.boolean(),
      fill: fc.array(segmentArb, { minLength: segs.length + 3, maxLength: segs.length + 3 }),
      rest: fc.array(segmentArb, { maxLength: 2 }),
    }),
  )
  .map(({ pattern, doubleStar, fill, rest }) => {
    const concrete = pattern.map((s, i) => (s === "*" ? fill[i]! : s));
    return {
      source: `GET /${[...pattern, ...(doubleStar ? ["**"] : [])].join("/")}`,
      segments: doubleStar ? [...concrete, ...rest] : concrete,
    };
  });

const hex = (c: string, lower: boolean) => {
  const h = c.charCodeAt(0).toString(16).padStart(2, "0");
  return `%${lower ? h : h.toUpperCase()}`;
};

/** One random equivalent spelling of `/segments...` (each rewrite is one an upstream undoes). */
const spellingArb = (segments: readonly string[]) =>
  fc
    .record({
      perChar: fc.array(fc.tuple(fc.nat(5), fc.boolean(), fc.boolean()), { minLength: 64, maxLength: 64 }),
      perSeg: fc.array(fc.tuple(fc.nat(7), fc.nat(3), segmentArb), { minLength: 12, maxLength: 12 }),
      leading: fc.nat(2),
      trailing: fc.boolean(),
    })
    .map(({ perChar, perSeg, leading, trailing }) => {
      let k = 0;
      const spellSegment = (seg: string) =>
        seg
          .split("")
          .map((c) => {
            const [how, lower, upper] = perChar[k++ % perChar.length]!;
            if (how === 0) return hex(c, lower); // percent-encoded
            if (how === 1) return upper ? c.toUpperCase() : c.toLowerCase(); // case
            return c;
          })
          .join("");
      const parts = segments.map((seg, i) => {
        const [extra, sep, junk] = perSeg[i % perSeg.length]!;
        let s = spellSegment(seg);
        if (extra === 1) s = `${s};${junk.replaceAll(";", "")}`; // path parameter
        if (extra === 2) s = `./${s}`; // dot segment
        if (extra === 3) s = `${junk}/../${s}`; // a segment and its undoing
        if (extra === 4) s = `${junk}/%2e%2E/${s}`; // encoded dot-dot
        if (extra === 5) s = `/${s}`; // a doubled slash
        return { s, sep };
      });
      let path = "/".repeat(leading + 1);
      parts.forEach(({ s, sep }, i) => {
        path += s;
        // After a ;parameter, an encoded slash belongs to the parameter (as Tomcat and Spring read it): use a real one.
        const hasParam = s.includes(";");
        if (i < parts.length - 1) path += sep === 0 && !hasParam ? "%2F" : sep === 1 ? "//" : "/";
      });
      return trailing ? `${path}/` : path;
    });

function compiled(source: string): RoutePattern {
  const p = compileRoute(source);
  if ("error" in p) throw new Error(p.error);
  return p;
}

describe("properties", () => {
  it("random equivalent spellings of a path still match its route", () => {
    fc.assert(
      fc.property(
        routeAndPathArb.chain(({ source, segments }) =>
          fc.record({ source: fc.constant(source), spelled: spellingArb(segments) }),
        ),
        ({ source, spelled }) => {
          const route = foldRoute(compiled(source));
          const c = canonicalPath(spelled);
          expect(c.ok).toBe(true);
          if (c.ok) expect(routeMatches(route, "GET", c.path), `${spelled} -> ${c.path}`).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("the canonical form is idempotent, and the forwarded form canonicalises the same", () => {
    const pathArb = fc
      .array(
        fc.constantFrom("a", "B", ".", "/", ";", "%2F", "%2e", "%25", "%41", "%3B", "%C3%A9", "..", "//", "%2f", "x"),
        { maxLength: 24 },
      )
      .map((parts) => `/${parts.join("")}`);
    fc.assert(
      fc.property(
        pathArb,
        fc.boolean(),
        fc.boolean(),
        fc.boolean(),
        (p, caseSensitive, keepEncodedSlash, keepParams) => {
          const options = { caseSensitive, keepEncodedSlash, keepParams };
          const once = canonicalPath(p, options);
          if (!once.ok) return;
          expect(canonicalPath(once.path, options)).toEqual(once);
          expect(canonicalPath(forwardedPath(p, options), options)).toEqual(once);
        },
      ),
      { numRuns: 1000 },
    );
  });
});
