/**
 * NGINX's location patterns as Sluice routes (`location /api/` as `* /api/**`, `~ \.php$` as `* /**.php`), and what
 * routes tell apart: whether two may match one request, whether one holds another, where two meet.
 */
import { compileRoute } from "../rules/route.ts";
import type { Directive } from "./nginx_conf.ts";

/** A regex's routes, one per alternative of its group (`alternatives`); `null` when one of them is not a route. */
export function regexRoutes(
  re: string,
  caseless: boolean,
): { re: string; route: string; inexact: string | null }[] | null {
  const whole = regexRoute(re, caseless);
  if (whole !== null) return [{ re, ...whole }];
  const each = alternatives(re).map((one) => ({ re: one, as: regexRoute(one, caseless) }));
  if (each.length === 0 || each.some((x) => x.as === null)) return null;
  return each.map((x) => ({ re: x.re, ...x.as! }));
}

/**
 * `^/api/(v1|v2)/users` as `^/api/v1/users` and `^/api/v2/users`, `\.(jpe?g|png)$` as `\.jpeg$`, `\.jpg$` and
 * `\.png$`: the one group of literal alternatives (at most 32 once a character's `?` is spelled both ways; the group
 * not repeated or optional) of a regex with no other group or `|` (but a final `(.*)` or `(/.*)?`); else none.
 */
export function alternatives(re: string): string[] {
  const m = /\((?:\?:)?((?:(?:\\.|[A-Za-z0-9_:.-])\??)+(?:\|(?:(?:\\.|[A-Za-z0-9_:.-])\??)+)+)\)(?![?*+{])/.exec(re);
  if (m === null) return [];
  const [before, after] = [re.slice(0, m.index), re.slice(m.index + m[0].length)];
  if (/[()|]/.test(before + after.replace(/\((?:\/)?\.\*\)\??\$?$/, ""))) return [];
  const options = m[1]!.split("|").flatMap(spelled);
  return options.length > 32 ? [] : options.map((o) => before + o + after);
}

/** A literal with optional characters (`jpe?g`, `x\.?y`) spelled every way: `jpeg`, `jpg`. */
function spelled(literal: string): string[] {
  const m = /(\\.|[^\\])\?/.exec(literal);
  if (m === null) return [literal];
  const [head, tail] = [literal.slice(0, m.index), literal.slice(m.index + m[0].length)];
  return spelled(tail).flatMap((t) => [head + m[1] + t, head + t]);
}

/** Whether two routes may match one request: `true` unless their segments tell them apart. */
export function mayOverlap(a: string, b: string): boolean {
  const sa = segmentsOf(a);
  const sb = segmentsOf(b);
  for (let i = 0; ; i++) {
    const x = sa[i];
    const y = sb[i];
    if (x === "**" || y === "**") return true;
    // `**text`: any rest ending in `text`, so only a literal rest that does not end in it tells them apart.
    if (x?.startsWith("**")) return endsIn(sb.slice(i), x.slice(2));
    if (y?.startsWith("**")) return endsIn(sa.slice(i), y.slice(2));
    if (x === undefined || y === undefined) {
      const other = x ?? y;
      return other === undefined;
    }
    const px = x.endsWith("**") ? x.slice(0, -2) : null;
    const py = y.endsWith("**") ? y.slice(0, -2) : null;
    if (px !== null || py !== null) {
      if (x === "*" || y === "*") return true;
      const lx = px ?? x;
      const ly = py ?? y;
      return px !== null && py !== null
        ? lx.startsWith(ly) || ly.startsWith(lx)
        : px === null
          ? lx.startsWith(ly)
          : ly.startsWith(lx);
    }
    if (x !== "*" && y !== "*" && x !== y) return false;
  }
}

/**
 * Whether a route's rest of segments may end in `text` (which holds no `/`, so only the last segment can): a literal
 * one that ends in it, another `**ending` that ends in it or it in that, or any other pattern.
 */
function endsIn(rest: readonly string[], text: string): boolean {
  const last = rest.at(-1);
  if (last === undefined) return false;
  if (last.startsWith("**") && last !== "**") return last.endsWith(text) || text.endsWith(last.slice(2));
  return last.includes("*") || last.endsWith(text);
}

function segmentsOf(route: string): string[] {
  const path = route.slice(route.indexOf(" ") + 1);
  const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
  return trimmed === "/" ? [] : trimmed.slice(1).split("/");
}

/**
 * The route of a location (`* /api/**`) and where it matches other requests than the location does (`null`: it does
 * not); `"named"` for `@name`; `null` when it cannot be a route.
 */
export function routeOfLocation(loc: Directive): { route: string; inexact: string | null } | null | "named" {
  const [a, b] = loc.args;
  if (a === undefined) return null;
  if (a.startsWith("@")) return "named";
  if (a === "=") {
    const route = b === undefined ? null : checked(`* ${b}`);
    if (route === null || b === undefined) return null;
    if (b === "/") return { route, inexact: null };
    const other = b.endsWith("/") ? b.slice(0, -1) : `${b}/`;
    return { route, inexact: `the route also matches ${other} (Sluice ignores one trailing slash)` };
  }
  if (a === "^~") return b === undefined ? null : prefixRoute(b);
  if (a === "~" || a === "~*") return b === undefined ? null : regexRoute(b, a === "~*");
  return prefixRoute(a);
}

/** `/api/` as `* /api/**`; `/v1/login` as `* /v1/login**`, which matches `/v1/loginx` too, as NGINX does. */
function prefixRoute(prefix: string): { route: string; inexact: string | null } | null {
  if (prefix === "/") return { route: "* /**", inexact: null };
  if (prefix.endsWith("/")) {
    const bare = prefix.slice(0, -1);
    const route = checked(`* ${bare}/**`);
    const inexact = `the route also matches ${bare} itself, which NGINX sends elsewhere (Sluice ignores one trailing slash)`;
    return route === null ? null : { route, inexact };
  }
  const route = checked(`* ${prefix}**`);
  return route === null ? null : { route, inexact: null };
}

/**
 * A path's ending (`\.php$`: any path ending in `.php`), or one below a prefix (`^/admin/.*\.php$`), as a route:
 * `* /**.php`, `* /admin/**.php`. Letters, digits, `_`, `-` and `\.` only; a trailing slash is ignored by Sluice.
 */
function suffixRoute(re: string, caseless: boolean): { route: string; inexact: string | null } | null {
  const m = /^(?:\^(\/(?:[A-Za-z0-9_:-]+\/)*)\.\*)?((?:\\\.|[A-Za-z0-9_-])+)\$$/.exec(re);
  if (m === null) return null;
  const route = checked(`* ${m[1] ?? "/"}**${m[2]!.replaceAll("\\.", ".")}`);
  const why = ["the route also matches the path with one trailing slash", ...(caseless ? [CASELESS] : [])];
  return route === null ? null : { route, inexact: why.join("; ") };
}

const CASELESS = "~* ignores case, as Sluice does unless PATH_CASE_SENSITIVE=true";

/** A regex made of literal segments, one-segment classes (`[^/]+`, `\d+`, `[0-9a-z]+`) and a final `.*`, as a route. */
function regexRoute(re: string, caseless: boolean): { route: string; inexact: string | null } | null {
  const suffix = suffixRoute(re, caseless);
  if (suffix !== null) return suffix;
  if (!re.startsWith("^/")) return null;
  let body = re.slice(1);
  let open = true;
  if (body.endsWith("$")) {
    body = body.slice(0, -1);
    open = false;
  }
  if (body.endsWith("/.*") || body.endsWith("(/.*)?")) {
    body = body.replace(/(?:\/\.\*|\(\/\.\*\)\?)$/, "");
    open = true;
  } else if (/(?:\(\.\*\)|\.\*)$/.test(body)) {
    // `^/1/(.*)` is the prefix `/1/`; `^/api.*` the text prefix `/api`, which matches `/apiv2` too.
    body = body.replace(/(?:\(\.\*\)|\.\*)$/, "");
    open = true;
  }
  // An open regex ending in a literal (`^/api`, `^/api.*`) matches any path starting with that text: `* /api**`.
  const textPrefix = open && !body.endsWith("/") && /\/[A-Za-z0-9_:-]+$/.test(body.replaceAll("\\.", "."));
  // A slash inside a class (`[^/]+`) does not separate segments.
  const segments = body.slice(1).split(/\/(?![^[]*\])/);
  const out: string[] = [];
  const widened: string[] = [];
  for (const seg of segments) {
    if (/^(?:\[\^\/\]\+|\\d\+|\[0-9\]\+|\[[a-zA-Z0-9_-]+\]\+|\\w\+)$/.test(seg)) {
      out.push("*");
      if (seg !== "[^/]+") widened.push(seg);
    } else if (/^[A-Za-z0-9_:-]+$/.test(seg.replaceAll("\\.", "."))) out.push(seg.replaceAll("\\.", "."));
    else if (seg === "" && out.length === segments.length - 1) continue;
    else return null;
  }
  const route = checked(
    textPrefix ? `* /${out.join("/")}**` : `* /${out.join("/")}${open ? "/**" : ""}`.replace("//**", "/**"),
  );
  if (route === null) return null;
  const why = [
    ...(widened.length > 0 ? [`* matches any segment where the regex takes only ${widened.join(", ")}`] : []),
    ...(open ? [] : ["the route also matches the path with one trailing slash"]),
    ...(open && body.endsWith("/") && body.length > 1
      ? [
          `the route also matches ${body.slice(0, -1)} itself, which the regex does not (Sluice ignores one trailing slash)`,
        ]
      : []),
    ...(caseless ? [CASELESS] : []),
  ];
  return { route, inexact: why.length === 0 ? null : why.join("; ") };
}

function checked(route: string): string | null {
  return "error" in compileRoute(route) ? null : route;
}

/** Whether route `outer` (ending in `/**` or `text**`) matches every request that `inner` does. */
export function covers(outer: string, inner: string): boolean {
  const o = outer.slice(2);
  const i = inner.slice(2);
  if (o === "/**") return true;
  if (o.endsWith("/**")) {
    const prefix = o.slice(0, -3);
    return i === prefix || i.startsWith(`${prefix}/`);
  }
  // `text**`: every match of `inner` starts with its literal beginning, so with `text` when that does.
  if (o.endsWith("**")) return i.startsWith(o.slice(0, -2));
  return false;
}

/**
 * The routes a rule keeps when its key is given only on `only` (a `map $uri` or `$request_method` with an empty
 * default): each pair's narrower route, a method from either side. `unsure` lists the pairs that overlap without
 * one holding the other, which routes cannot say exactly (the narrower-looking `only` route is kept for them).
 */
export function intersectRoutes(
  routes: readonly string[] | null,
  only: readonly string[],
): { routes: string[]; unsure: string[] } {
  if (routes === null) return { routes: [...only], unsure: [] };
  const out: string[] = [];
  const unsure: string[] = [];
  for (const r of routes) {
    for (const o of only) {
      const [rm, om] = [r.slice(0, r.indexOf(" ")), o.slice(0, o.indexOf(" "))];
      if (rm !== "*" && om !== "*" && rm !== om) continue;
      const method = rm === "*" ? om : rm;
      const [rp, op] = [r.slice(rm.length + 1), o.slice(om.length + 1)];
      if (rp === op || covers(`* ${op}`, `* ${rp}`)) out.push(`${method} ${rp}`);
      else if (covers(`* ${rp}`, `* ${op}`)) out.push(`${method} ${op}`);
      else if (mayOverlap(r, o)) {
        out.push(`${method} ${op}`);
        unsure.push(`${r} and ${o}`);
      }
    }
  }
  return { routes: [...new Set(out)], unsure };
}
