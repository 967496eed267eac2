/**
 * The configuration and schedule of `npm run test:nginx` (scripts/nginx-differential.ts): one NGINX server of the
 * shape most configurations have, with no `location /`: a server-level `limit_req` that requests no location matches
 * and a location without its own limits inherit; locations with their own limits (burst 0, a queue, `nodelay`,
 * `delay=`, two limits, `r/m` rates NGINX rounds); a zone shared by two locations; a `limit_req_dry_run` location; and
 * keys of `$binary_remote_addr$uri`, `$http_x_tenant` (a request without the header has an empty key: not limited)
 * and `$server_name`; a regex location of two alternatives (one route each in Sluice); one of a path's ending that
 * wins over prefix locations with their own limits (`* /**.php` in Sluice, left out of theirs); a map of a header's
 * values (`match.header` in Sluice); the API key, else the address (`identity: api_key`); a map giving several keys
 * by a header's value (one rule per key); a map over two flag maps written together (one rule per key, picked by
 * presence tests); a map whose default gives the key and whose values exempt (a `not` test reading a missing header as
 * empty); a map giving several keys by path (one rule per key on its routes). Every request of a case is sent to the case's path with `?r=N`, which names it in the logs.
 */
import { exactZone, type NginxLimit, NginxZone, nginxStoredRate } from "../src/migrate/nginx_rate.ts";
import { nginxPreamble } from "./nginx-run.ts";

export const CLIENT = "127.0.0.1";
export const SERVER_NAME = "sluice-differential";

export interface ZoneSpec {
  readonly name: string;
  readonly amount: number;
  readonly unit: "s" | "m";
  readonly key:
    | "$binary_remote_addr"
    | "$binary_remote_addr$uri"
    | "$http_x_tenant"
    | "$server_name"
    | "$tier_key"
    | "$api_key_key"
    | "$multi_key"
    | "$concat_key"
    | "$exempt_key"
    | "$route_key"
    | "$geo_key"
    | "$geotier_key"
    | "$rx_key";
}

export interface LimitSpec {
  readonly zone: string;
  readonly burst: number;
  readonly delay: number | "nodelay";
}

/** One request: when (ms from the case's start), the path's last segment, the X-Tenant header. */
export interface Send {
  readonly at: number;
  readonly sub?: string;
  readonly tenant?: string;
  /** The X-API-Key header. */
  readonly apiKey?: string;
  /** The client address NGINX reads (`set_real_ip_from` the loopback, `real_ip_header X-Real-IP`). */
  readonly from?: string;
}

export interface Case {
  readonly path: string;
  /** The locations the case's requests go to (`null`: none matches, the server's own limits apply). */
  readonly location: "own" | "inherit" | null;
  readonly limits: readonly LimitSpec[];
  readonly dryRun?: boolean;
  /** The location's own match, when not the case's path as a prefix (a regex: `~ ^/alt/(a|b)/`). */
  readonly match?: string;
  readonly schedule: readonly Send[];
}

export const ZONES: readonly ZoneSpec[] = [
  { name: "srv", amount: 4, unit: "s", key: "$binary_remote_addr" },
  { name: "b0", amount: 10, unit: "s", key: "$binary_remote_addr" },
  { name: "queue", amount: 5, unit: "s", key: "$binary_remote_addr" },
  { name: "nd", amount: 5, unit: "s", key: "$binary_remote_addr" },
  { name: "dl", amount: 5, unit: "s", key: "$binary_remote_addr" },
  { name: "twoa", amount: 10, unit: "s", key: "$binary_remote_addr" },
  { name: "twob", amount: 2, unit: "s", key: "$binary_remote_addr" },
  { name: "rm7", amount: 7, unit: "m", key: "$binary_remote_addr" },
  { name: "rm4", amount: 4, unit: "m", key: "$binary_remote_addr" },
  { name: "rm3", amount: 3, unit: "m", key: "$binary_remote_addr" },
  { name: "shared", amount: 5, unit: "s", key: "$binary_remote_addr" },
  { name: "dry", amount: 5, unit: "s", key: "$binary_remote_addr" },
  { name: "peruri", amount: 5, unit: "s", key: "$binary_remote_addr$uri" },
  { name: "tenant", amount: 5, unit: "s", key: "$http_x_tenant" },
  { name: "site", amount: 5, unit: "s", key: "$server_name" },
  { name: "alt", amount: 5, unit: "s", key: "$binary_remote_addr" },
  { name: "ext", amount: 5, unit: "s", key: "$binary_remote_addr" },
  { name: "tier", amount: 5, unit: "s", key: "$tier_key" },
  { name: "keyed", amount: 5, unit: "s", key: "$api_key_key" },
  { name: "multi", amount: 5, unit: "s", key: "$multi_key" },
  { name: "concat", amount: 5, unit: "s", key: "$concat_key" },
  { name: "exempt", amount: 5, unit: "s", key: "$exempt_key" },
  { name: "byroute", amount: 5, unit: "s", key: "$route_key" },
  { name: "geo", amount: 5, unit: "s", key: "$geo_key" },
  { name: "geotier", amount: 5, unit: "s", key: "$geotier_key" },
  { name: "rxmap", amount: 5, unit: "s", key: "$rx_key" },
  // Only for the readiness probe, which must not spend the server's limit.
  { name: "ready", amount: 1000, unit: "s", key: "$binary_remote_addr" },
];

const SERVER_LIMIT: LimitSpec = { zone: "srv", burst: 2, delay: "nodelay" };
const at = (...times: number[]): Send[] => times.map((t) => ({ at: t }));
const burstAt = (start: number, n: number, gap = 0) => at(...Array.from({ length: n }, (_, i) => start + i * gap));

export const CASES: readonly Case[] = [
  // No location matches: the server's limit (4/s, burst 2, nodelay).
  { path: "/nowhere/", location: null, limits: [SERVER_LIMIT], schedule: [...burstAt(0, 5), ...burstAt(300, 3, 130)] },
  // A location without limit_req inherits the server's, with the same budget per key as /nowhere/.
  { path: "/inherit/", location: "inherit", limits: [SERVER_LIMIT], schedule: at(900, 910, 1500) },
  {
    path: "/b0/",
    location: "own",
    limits: [{ zone: "b0", burst: 0, delay: 0 }],
    schedule: [...burstAt(0, 3), ...burstAt(150, 8, 60), ...at(1000, 1040, 1160)],
  },
  // A queue of 5 at 5/s: 8 at once, 6 admitted with delays 0..1000 ms, 2 denied; more once it drains.
  {
    path: "/queue/",
    location: "own",
    limits: [{ zone: "queue", burst: 5, delay: 0 }],
    schedule: [...burstAt(0, 8), ...at(1530, 1550, 2400, 2420)],
  },
  {
    path: "/nd/",
    location: "own",
    limits: [{ zone: "nd", burst: 5, delay: "nodelay" }],
    schedule: [...burstAt(0, 8), ...at(250, 450, 460, 1700)],
  },
  {
    path: "/dl/",
    location: "own",
    limits: [{ zone: "dl", burst: 6, delay: 3 }],
    schedule: [...burstAt(0, 9), ...at(700, 710, 2500)],
  },
  {
    path: "/two/",
    location: "own",
    limits: [
      { zone: "twoa", burst: 2, delay: "nodelay" },
      { zone: "twob", burst: 4, delay: "nodelay" },
    ],
    schedule: [...burstAt(0, 7), ...at(330, 520, 1250, 1260, 1270)],
  },
  // 7r/m: NGINX admits every 8,621 ms, Sluice every 8,571.4 ms. Requests at 8,596 and 8,650 ms are where they part.
  {
    path: "/rm7/",
    location: "own",
    limits: [{ zone: "rm7", burst: 0, delay: 0 }],
    schedule: at(0, 8596, 8650, 17330, 25900, 25975),
  },
  // 4r/m: NGINX every 15,152 ms (66 per 1000 s), Sluice every 15,000 ms.
  { path: "/rm4/", location: "own", limits: [{ zone: "rm4", burst: 0, delay: 0 }], schedule: at(0, 15076, 15200) },
  // 3r/m with a burst: admissions less than 20 ms apart leak nothing in NGINX.
  {
    path: "/rm3/",
    location: "own",
    limits: [{ zone: "rm3", burst: 3, delay: "nodelay" }],
    schedule: at(0, 19, 38, 57, 20028, 20100, 40200),
  },
  // One zone in two locations with the same settings: one budget per key across them.
  {
    path: "/sh/",
    location: "own",
    limits: [{ zone: "shared", burst: 2, delay: "nodelay" }],
    schedule: [0, 0, 10, 20, 30, 400, 410, 420].map((t, i) => ({ at: t, sub: i % 2 === 0 ? "a/" : "b/" })),
  },
  // Dry run: everything passes; NGINX logs REJECTED_DRY_RUN where it would have refused.
  {
    path: "/dry/",
    location: "own",
    limits: [{ zone: "dry", burst: 1, delay: "nodelay" }],
    dryRun: true,
    schedule: [...burstAt(0, 4), ...at(250, 260, 700)],
  },
  // $binary_remote_addr$uri: one budget per path.
  {
    path: "/uri/",
    location: "own",
    limits: [{ zone: "peruri", burst: 1, delay: "nodelay" }],
    schedule: [0, 0, 0, 5, 5, 5, 250, 260].map((t, i) => ({ at: t, sub: i % 2 === 0 ? "x" : "y" })),
  },
  // $http_x_tenant: one budget per tenant; a request without the header has an empty key and is not limited.
  {
    path: "/tenant/",
    location: "own",
    limits: [{ zone: "tenant", burst: 1, delay: "nodelay" }],
    schedule: [
      ...[0, 0, 0, 1, 1, 1].map((t, i) => ({ at: t, tenant: i < 3 ? "t1" : "t2" })),
      ...[2, 3, 4, 5].map((t) => ({ at: t })),
      { at: 400, tenant: "t1" },
      { at: 410, tenant: "t1" },
    ],
  },
  // A regex location of two alternatives: one route each in Sluice, one budget per key across them, as one location.
  {
    path: "/alt/",
    location: "own",
    match: "~ ^/alt/(a|b)/",
    limits: [{ zone: "alt", burst: 2, delay: "nodelay" }],
    schedule: [0, 0, 10, 20, 30, 400, 410, 420].map((t, i) => ({ at: t, sub: i % 2 === 0 ? "a/x" : "b/y" })),
  },
  // A regex location of a path's ending (`* /**.php`, `* /**.jpg`, `* /**.jpeg` in Sluice). NGINX sends it requests
  // under a prefix location with its own limit (/b0/, /queue/), as regexes win over prefixes: Sluice's rules for those
  // leave the endings out (`except`). `~*` ignores case, as Sluice does by default (/B0/Y.PHP).
  {
    path: "/",
    location: "own",
    match: "~* \\.(php|jpe?g)$",
    limits: [{ zone: "ext", burst: 2, delay: "nodelay" }],
    schedule: [0, 0, 10, 20, 30, 400, 410, 420].map((t, i) => ({
      at: t,
      sub: ["b0/x.php", "queue/a/y.jpg", "z.jpeg", "B0/Y.PHP"][i % 4]!,
    })),
  },
  // A map of a header's values (TIER_MAP): only requests whose X-Tenant is listed get the key, `match.header` in
  // Sluice. Strings ignore case in NGINX's map; `~*` regexes too; the exempt string wins over the regex.
  {
    path: "/tier/",
    location: "own",
    limits: [{ zone: "tier", burst: 1, delay: "nodelay" }],
    schedule: [
      ...[0, 0, 1, 1, 2, 2, 3, 3].map((t, i) => ({
        at: t,
        tenant: ["bot-1", "BOT-2", "Gold", "gold", "silver", "bot-free", "bot-x", "GOLD"][i]!,
      })),
      { at: 4 },
      { at: 5 },
      { at: 300, tenant: "bot-3" },
      { at: 310, tenant: "bot-3" },
    ],
  },
  // The API key, else the address (API_KEY_MAP): `identity: api_key` in Sluice, whose callers without a key are
  // counted by address. Each key its own budget, and the address one more.
  {
    path: "/keyed/",
    location: "own",
    limits: [{ zone: "keyed", burst: 1, delay: "nodelay" }],
    schedule: [
      { at: 0, apiKey: "k-one" },
      { at: 0, apiKey: "k-one" },
      { at: 0, apiKey: "k-one" },
      { at: 3, apiKey: "k-two" },
      { at: 3, apiKey: "k-two" },
      { at: 6 },
      { at: 6 },
      { at: 6 },
      { at: 400, apiKey: "k-one" },
      { at: 410, apiKey: "k-one" },
    ],
  },
  // A map giving several keys by the value (MULTI_MAP): one rule per key in Sluice, each with its conditions.
  {
    path: "/multi/",
    location: "own",
    limits: [{ zone: "multi", burst: 1, delay: "nodelay" }],
    schedule: [
      ...[0, 0, 0].map((t) => ({ at: t })),
      ...[3, 3, 3].map((t) => ({ at: t, tenant: "bot-a" })),
      { at: 5, tenant: "GOLD" },
      { at: 5, tenant: "gold" },
      { at: 5, tenant: "gold" },
      ...[7, 7, 7].map((t) => ({ at: t, tenant: "silver" })),
      { at: 9, tenant: "bot-b" },
      { at: 400 },
      { at: 410, tenant: "bot-a" },
    ],
  },
  // A map over two flag maps written together (CONCAT_MAPS, the corpus's hectcastro): the API key, else the tenant,
  // else the address, one zone in NGINX; in Sluice one rule per key, each picked by presence tests.
  {
    path: "/concat/",
    location: "own",
    limits: [{ zone: "concat", burst: 1, delay: "nodelay" }],
    schedule: [
      ...[0, 0, 0].map((t) => ({ at: t, apiKey: "c-one" })),
      ...[3, 3, 3].map((t) => ({ at: t, tenant: "t-one" })),
      ...[5, 5].map((t) => ({ at: t, apiKey: "c-two", tenant: "t-one" })),
      ...at(7, 7, 7),
      { at: 400, tenant: "t-one" },
      { at: 405, apiKey: "c-one" },
      { at: 410 },
      { at: 415, apiKey: "c-one", tenant: "t-one" },
      // X-API-Key sent empty: NGINX reads it as not sent (its flag map gives 0), so the tenant's key, then the address.
      { at: 420, apiKey: "", tenant: "t-one" },
      { at: 425, apiKey: "" },
      { at: 430, apiKey: "" },
    ],
  },
  // A map whose default gives the key (EXEMPT_MAP): every request by address, requests without X-Tenant included,
  // but those it exempts; `pro` counted by its own value. In Sluice a `not` test with `missing_as_empty` (NGINX reads
  // a missing header as ""), and one rule for `pro`.
  {
    path: "/exempt/",
    location: "own",
    limits: [{ zone: "exempt", burst: 1, delay: "nodelay" }],
    schedule: [
      ...at(0, 0, 0),
      ...[3, 3].map((t) => ({ at: t, tenant: "bot-1" })),
      ...[4, 4].map((t) => ({ at: t, tenant: "Internal" })),
      ...[5, 5, 5].map((t) => ({ at: t, tenant: "pro" })),
      ...[7, 7].map((t) => ({ at: t, tenant: "gold" })),
      { at: 400 },
      { at: 405, tenant: "pro" },
      { at: 410, tenant: "BOT-2" },
      { at: 415, tenant: "gold" },
    ],
  },
  // A map giving several keys by path (ROUTE_MAP): /a/ by address, /b/ by X-Tenant, the rest not limited. In Sluice
  // one rule per key, each on the routes that get it.
  {
    path: "/byroute/",
    location: "own",
    limits: [{ zone: "byroute", burst: 1, delay: "nodelay" }],
    schedule: [
      ...[0, 0, 0].map((t) => ({ at: t, sub: "a/x" })),
      ...[3, 3, 3].map((t) => ({ at: t, sub: "b/x", tenant: "t1" })),
      ...[5, 5].map((t) => ({ at: t, sub: "b/y", tenant: "t2" })),
      ...[7, 7, 7].map((t) => ({ at: t, sub: "c/x" })),
      ...[9, 9].map((t) => ({ at: t, sub: "b/z" })),
      { at: 400, sub: "a/y" },
      { at: 410, sub: "b/x", tenant: "t1" },
    ],
  },
  // $server_name: one budget for every client of the server.
  {
    path: "/site/",
    location: "own",
    limits: [{ zone: "site", burst: 2, delay: "nodelay" }],
    schedule: [...burstAt(0, 5), ...at(200, 410, 420)],
  },
  // NGINX's own allowlist (GEO_MAP): a geo of the client address turned into the key or an empty one. The office's
  // /28 and an IPv6 /48 are never limited (match.except_address in Sluice); the next address and others are. The
  // address is the X-Real-IP header's (real_ip_header, trusted from the loopback), from the documentation ranges.
  {
    path: "/geo/",
    location: "own",
    limits: [{ zone: "geo", burst: 1, delay: "nodelay" }],
    schedule: [
      ...[0, 0, 0, 0].map((t) => ({ at: t, from: "203.0.113.5" })),
      ...[3, 3, 3].map((t) => ({ at: t, from: "203.0.113.16" })),
      ...[5, 5, 5].map((t) => ({ at: t, from: "2001:db8:1:2::9" })),
      ...[7, 7, 7].map((t) => ({ at: t, from: "2001:db8:2::9" })),
      ...[9, 9, 9].map((t) => ({ at: t, from: "198.51.100.7" })),
      { at: 400, from: "203.0.113.16" },
      { at: 405, from: "203.0.113.15" },
    ],
  },
  // A geo whose map gives several keys (GEO_TIER_MAP): the partner's /24 one budget together, the office none, every
  // other client its own; in Sluice one rule per key, by match.address and match.except_address.
  {
    path: "/geotier/",
    location: "own",
    limits: [{ zone: "geotier", burst: 1, delay: "nodelay" }],
    schedule: [
      { at: 0, from: "198.51.100.1" },
      { at: 0, from: "198.51.100.2" },
      { at: 0, from: "198.51.100.3" },
      ...[3, 3, 3].map((t) => ({ at: t, from: "203.0.113.9" })),
      ...[5, 5, 5].map((t) => ({ at: t, from: "192.0.2.44" })),
      { at: 7, from: "192.0.2.45" },
      { at: 400, from: "198.51.100.200" },
      { at: 405, from: "198.51.100.201" },
    ],
  },
  // A map of the address by text (RX_MAP): an address string, then regexes in order, the first that matches wins
  // (203.0.113.5's own regex comes after the /24's, so it never matches); in Sluice match.except_address.
  {
    path: "/rxmap/",
    location: "own",
    limits: [{ zone: "rxmap", burst: 1, delay: "nodelay" }],
    schedule: [
      ...[0, 0, 0].map((t) => ({ at: t, from: "203.0.113.5" })),
      ...[3, 3, 3].map((t) => ({ at: t, from: "198.51.100.7" })),
      ...[5, 5, 5].map((t) => ({ at: t, from: "198.51.100.8" })),
      ...[7, 7, 7].map((t) => ({ at: t, from: "192.0.2.9" })),
    ],
  },
];

function limitText(l: LimitSpec): string {
  const delay = l.delay === "nodelay" ? " nodelay" : l.delay > 0 ? ` delay=${l.delay}` : "";
  return `limit_req zone=${l.zone}${l.burst > 0 ? ` burst=${l.burst}` : ""}${delay};`;
}

function locationsOf(c: Case): string[] {
  const body = (limits: string) => `${limits}\n      try_files /ok.txt =404;`;
  const own = [...c.limits.map(limitText), ...(c.dryRun === true ? ["limit_req_dry_run on;"] : [])].join("\n      ");
  if (c.location === null) return [];
  const paths = [...new Set(c.schedule.map((s) => `${c.path}${s.sub ?? ""}`))];
  const where = c.match !== undefined ? [c.match] : c.path === "/sh/" ? paths : [c.path];
  return where.map(
    (p) =>
      `    location ${p} {\n      ${c.location === "own" ? body(own) : body("# inherits the server's limit_req")}\n    }`,
  );
}

export function nginxConf(dir: string, port: number): string {
  const zones = ZONES.map((z) => `  limit_req_zone ${z.key} zone=${z.name}:1m rate=${z.amount}r/${z.unit};`);
  return `${nginxPreamble(dir, '$remote_addr $msec $request_time $status $limit_req_status "$request" "$http_x_tenant" "$http_x_api_key"')}
  default_type text/plain;
${TIER_MAP}
${API_KEY_MAP}
${MULTI_MAP}
${CONCAT_MAPS}
${EXEMPT_MAP}
${ROUTE_MAP}
${GEO_MAP}
${GEO_TIER_MAP}
${RX_MAP}
${zones.join("\n")}
  server {
    listen ${CLIENT}:${port};
    server_name ${SERVER_NAME};
    root ${dir}/www;
    set_real_ip_from ${CLIENT};
    real_ip_header X-Real-IP;
    ${limitText(SERVER_LIMIT)}
    location = /ready { limit_req zone=ready burst=1000 nodelay; try_files /ok.txt =404; }
${CASES.flatMap(locationsOf).join("\n")}
  }
}
`;
}

/** The header map of the /tier/ case: `bot-free` is exempt (an exact string, tried before the regex). */
const TIER_MAP = `  map $http_x_tenant $tier_key {
    default "";
    ~*^bot $binary_remote_addr;
    gold $binary_remote_addr;
    bot-free "";
  }`;

/** The /keyed/ case's map: the API key, and the client's address for a request without one. */
const API_KEY_MAP = `  map $http_x_api_key $api_key_key {
    "" $binary_remote_addr;
    default $http_x_api_key;
  }`;

/** The /multi/ case's map: requests without X-Tenant share one key, bots each their own, gold one more. */
const MULTI_MAP = `  map $http_x_tenant $multi_key {
    "" umbrella;
    ~^bot $http_x_tenant;
    gold g;
    default "";
  }`;

/** The /concat/ case's maps: whether X-API-Key and X-Tenant are sent, then the key by both flags. */
const CONCAT_MAPS = `  map $http_x_api_key $has_key { default 0; "~." 1; }
  map $http_x_tenant $has_tenant { default 0; "~." 1; }
  map $has_key$has_tenant $concat_key {
    default $binary_remote_addr;
    "~^1" $http_x_api_key;
    "01" $http_x_tenant;
  }`;

/** The /exempt/ case's map: the address, but for bots and `internal` (none) and `pro` (its own value). */
const EXEMPT_MAP = `  map $http_x_tenant $exempt_key {
    default $binary_remote_addr;
    ~*^bot "";
    internal "";
    pro $http_x_tenant;
  }`;

/** What EXEMPT_MAP gives a request: strings (ignoring case) first, then the regex, then the address. */
function exemptKey(tenant: string): string {
  const t = tenant.toLowerCase();
  if (t === "internal") return "";
  if (t === "pro") return tenant;
  return /^bot/i.test(tenant) ? "" : CLIENT;
}

/**
 * The /geo/ case's geo and map: the office's ranges get an empty key (not limited), every other client its address.
 * The office's /28 is given twice (NGINX keeps the later value) and a /24 is deleted again (its 198.51.100.7 limited).
 */
const GEO_MAP = `  geo $geo_limited {
    default 1;
    203.0.113.0/28 1;
    203.0.113.0/28 0;
    2001:db8:1::/48 0;
    198.51.100.0/24 0;
    delete 198.51.100.0/24;
  }
  map $geo_limited $geo_key { 0 ""; 1 $binary_remote_addr; }`;

/**
 * The /geotier/ case's geo and map: a partner's /24 shares one key, the office has none, others their address. As
 * `ranges`, with a range deleted again (192.0.2.44 and .45 their own keys).
 */
const GEO_TIER_MAP = `  geo $geotier {
    ranges;
    default free;
    198.51.100.0-198.51.100.255 partner;
    203.0.113.0-203.0.113.15 office;
    192.0.2.0-192.0.2.255 office;
    delete 192.0.2.0-192.0.2.255;
  }
  map $geotier $geotier_key { free $binary_remote_addr; partner "partner"; office ""; }`;

/** The /rxmap/ case's map of the address as text: a string, then regexes in order (the second never matches). */
const RX_MAP = `  map $remote_addr $rx_key {
    default $binary_remote_addr;
    ~^203\\.0\\.113\\. "";
    ~^203\\.0\\.113\\.5$ $binary_remote_addr;
    198.51.100.7 "";
  }`;

/** What RX_MAP gives a client. */
function rxKey(address: string): string {
  return address === "198.51.100.7" || address.startsWith("203.0.113.") ? "" : address;
}

/** What GEO_TIER_MAP gives a client. */
function geoTierKey(address: string): string {
  if (address.startsWith("198.51.100.")) return "partner";
  const office = /^203\.0\.113\.(\d+)$/.exec(address);
  return office !== null && Number(office[1]) < 16 ? "" : address;
}

/** What GEO_MAP gives a client: empty in the office's ranges, else its address. */
function geoKey(address: string): string {
  const office = /^203\.0\.113\.(\d+)$/.exec(address);
  if (office !== null && Number(office[1]) < 16) return "";
  return address.toLowerCase().startsWith("2001:db8:1:") ? "" : address;
}

/** The /byroute/ case's map: a key by path, the address under /a/ and the tenant under /b/. */
const ROUTE_MAP = `  map $uri $route_key {
    ~^/byroute/a/ $binary_remote_addr;
    ~^/byroute/b/ $http_x_tenant;
    default "";
  }`;

/** What ROUTE_MAP gives a request at `uri`. */
function routeKey(uri: string, tenant: string): string {
  if (uri.startsWith("/byroute/a/")) return CLIENT;
  return uri.startsWith("/byroute/b/") ? tenant : "";
}

/** The model's zones, fresh: NGINX's arithmetic, or (`exact`) the same without its roundings, as Sluice counts. */
export function modelZones(exact = false): Map<string, NginxZone> {
  return new Map(
    ZONES.map((z) => {
      const unit = z.unit === "s" ? "s" : "min";
      return [z.name, exact ? exactZone(z.amount, unit) : new NginxZone(nginxStoredRate(z.amount, unit))];
    }),
  );
}

/** A request's limits in the model, each with its key in its zone (`""`: empty, the limit is skipped). */
export function modelLimits(
  c: Case,
  zones: ReadonlyMap<string, NginxZone>,
  uri: string,
  tenant: string | undefined,
  apiKey?: string,
  from?: string,
): NginxLimit[] {
  return c.limits.map((l) => {
    const spec = ZONES.find((z) => z.name === l.zone)!;
    const key =
      spec.key === "$binary_remote_addr"
        ? CLIENT
        : spec.key === "$binary_remote_addr$uri"
          ? `${CLIENT}${uri}`
          : spec.key === "$http_x_tenant"
            ? (tenant ?? "")
            : spec.key === "$tier_key"
              ? tierKey(tenant ?? "")
              : spec.key === "$api_key_key"
                ? (apiKey ?? CLIENT)
                : spec.key === "$multi_key"
                  ? multiKey(tenant ?? "")
                  : spec.key === "$concat_key"
                    ? apiKey || tenant || CLIENT
                    : spec.key === "$exempt_key"
                      ? exemptKey(tenant ?? "")
                      : spec.key === "$route_key"
                        ? routeKey(uri, tenant ?? "")
                        : spec.key === "$geo_key"
                          ? geoKey(from ?? CLIENT)
                          : spec.key === "$geotier_key"
                            ? geoTierKey(from ?? CLIENT)
                            : spec.key === "$rx_key"
                              ? rxKey(from ?? CLIENT)
                              : SERVER_NAME;
    return { zone: zones.get(l.zone)!, burst: l.burst, delay: l.delay === "nodelay" ? l.burst : l.delay, key };
  });
}

/** What TIER_MAP gives a request: its address for a listed value (strings ignoring case), else empty. */
function tierKey(tenant: string): string {
  const t = tenant.toLowerCase();
  if (t === "bot-free") return "";
  return t === "gold" || /^bot/i.test(tenant) ? CLIENT : "";
}

/** What MULTI_MAP gives a request: strings (ignoring case) first, then the regex; else empty (not limited). */
function multiKey(tenant: string): string {
  if (tenant === "") return "umbrella";
  if (tenant.toLowerCase() === "gold") return "g";
  return /^bot/.test(tenant) ? tenant : "";
}
