/**
 * What `nginx -t` refuses among the limiting directives, checked before `sluice import nginx` reads them: a
 * configuration NGINX would not load has no behaviour to import, and importing it anyway would make rules of
 * something that never ran. The checks follow NGINX 1.22's own (ngx_http_limit_req_module.c,
 * ngx_http_limit_conn_module.c, ngx_conf_file.c), in the order NGINX reads the file, and each message quotes NGINX's:
 * where a directive is allowed (`http` only for the zones; `http`, `server` and `location`, not `if` or
 * `limit_except`, for the rest), how many arguments it takes, each parameter's syntax and bounds (`burst=` and `delay=`
 * above 0, a zone of at least 32 KiB, `rate=N` with an optional `r/s` or `r/m`), and what one block may not say twice.
 * The directives in a location that a `return` answers are checked too: NGINX checks them.
 */
import { type Directive, NginxImportError, where } from "./nginx_conf.ts";

type Place = "http" | "server" | "location" | "if" | "limit_except";

/** The blocks whose entries are directives and where they may stand; other blocks (`map`, `types`, ...) hold data. */
const BLOCKS: Readonly<Record<string, readonly Place[]>> = {
  server: ["http"],
  location: ["server", "location"],
  if: ["server", "location"],
  limit_except: ["location"],
};

/** A module's directives: the zone definition, the limit, and the settings a block may set once. */
interface Module {
  readonly zone: string;
  readonly limit: string;
  readonly status: string;
  readonly dryRun: string;
  readonly logLevel: string;
}

const MODULES: readonly Module[] = ["limit_req", "limit_conn"].map((m) => ({
  zone: `${m}_zone`,
  limit: m,
  status: `${m}_status`,
  dryRun: `${m}_dry_run`,
  logLevel: `${m}_log_level`,
}));

/** NGINX's own `nginx -t` pages are 4 KiB on the machines it runs on: a zone needs 8 of them. */
const MIN_ZONE_BYTES = 8 * 4096;
const MAX_INT = (1n << 63n) - 1n;
const LOG_LEVELS = ["info", "notice", "warn", "error"];

function refuse(d: Directive, why: string): never {
  // A template's `${VAR}` (envsubst, the nginx Docker image's templates) is not NGINX syntax: say what it is.
  const template = d.args.some((a) => a.includes("${"))
    ? " (it holds an unsubstituted template variable: import the file its template makes)"
    : "";
  throw new NginxImportError(
    `${where(d)}: ${d.name}: ${why}${template}; NGINX refuses this configuration (nginx -t), so it is not imported`,
  );
}

/** NGINX's ngx_atoi: decimal digits only, at most 2^63-1; `null` where it returns NGX_ERROR. */
export function nginxInt(s: string): bigint | null {
  if (!/^[0-9]+$/.test(s)) return null;
  const n = BigInt(s);
  return n > MAX_INT ? null : n;
}

/** NGINX's ngx_parse_size: digits with an optional k/K or m/M; `null` where it refuses. */
function nginxSize(s: string): bigint | null {
  const m = /^([0-9]*)([kKmM]?)$/.exec(s);
  if (m === null) return null;
  const n = nginxInt(m[1]!);
  if (n === null) return null;
  const scale = m[2] === "" ? 1n : /[kK]/.test(m[2]!) ? 1024n : 1024n * 1024n;
  return n * scale > MAX_INT ? null : n * scale;
}

/** Refuse the first directive, in NGINX's reading order, that `nginx -t` would refuse. */
export function checkNginx(http: readonly Directive[]): void {
  // Every shared memory zone, by name: which module registered it first (by defining it or by using it).
  const zones = new Map<string, { module: Module; defined: boolean; at: Directive }>();
  const register = (d: Directive, module: Module, name: string, defining: boolean) => {
    const known = zones.get(name);
    if (known !== undefined && known.module !== module)
      refuse(d, `the shared memory zone "${name}" is already declared for a different use`);
    if (known?.defined === true && defining)
      refuse(d, `zone "${name}" is already defined (a zone is bound to one key)`);
    zones.set(name, { module, defined: defining || known?.defined === true, at: known?.at ?? d });
  };
  const walk = (block: readonly Directive[], place: Place) => {
    const once = new Set<string>();
    const limited = new Map<Module, Set<string>>();
    for (const d of block) {
      const module = MODULES.find((m) => Object.values(m).includes(d.name));
      if (module !== undefined) {
        checkDirective(d, module, place, once, limited, register);
        continue;
      }
      const inner = BLOCKS[d.name];
      if (d.block === null || inner === undefined || !inner.includes(place)) continue;
      walk(d.block, d.name as Place);
    }
  };
  walk(http, "http");
  for (const [name, zone] of zones) {
    if (zone.defined) continue;
    // NGINX: `zero size shared memory zone "NAME"`; withZonesElsewhere names where such a zone may be defined first.
    refuse(zone.at, `no ${zone.module.zone} defines zone "${name}" (zero size shared memory zone)`);
  }
}

function checkDirective(
  d: Directive,
  module: Module,
  place: Place,
  once: Set<string>,
  limited: Map<Module, Set<string>>,
  register: (d: Directive, module: Module, name: string, defining: boolean) => void,
): void {
  const zoneDirective = d.name === module.zone;
  if (d.block !== null) refuse(d, `directive "${d.name}" is not terminated by ";"`);
  if (zoneDirective ? place !== "http" : !["http", "server", "location"].includes(place))
    refuse(d, `"${d.name}" directive is not allowed here`);
  const [min, max] =
    d.name === module.limit
      ? module.limit === "limit_req"
        ? [1, 3]
        : [2, 2]
      : zoneDirective
        ? module.limit === "limit_req"
          ? [3, 3]
          : [2, 2]
        : [1, 1];
  // NGINX Plus's `sync` (a zone shared across a cluster) takes one more argument; NGINX itself has none.
  const plus = zoneDirective && d.args.at(-1) === "sync" ? 1 : 0;
  const given = d.args.length - plus;
  if (given < min || given > max) refuse(d, `invalid number of arguments in "${d.name}" directive`);
  const arg = d.args[0]!;
  if (d.name === module.zone) {
    register(d, module, zoneParams(d, module), true);
  } else if (d.name === module.limit) {
    const names = module.limit === "limit_req" ? limitReqZones(d) : [limitConnZone(d)];
    for (const n of names) register(d, module, n, false);
    // NGINX keeps the last `zone=` of a `limit_req`.
    const name = names.at(-1)!;
    const here = limited.get(module) ?? new Set<string>();
    if (here.has(name)) refuse(d, `"${d.name}" directive is duplicate (zone "${name}" twice in one block)`);
    limited.set(module, here.add(name));
  } else {
    if (once.has(d.name)) refuse(d, `"${d.name}" directive is duplicate`);
    once.add(d.name);
    if (d.name === module.status) {
      const n = nginxInt(arg);
      if (n === null) refuse(d, `invalid number "${arg}"`);
      if (n < 400n || n > 599n) refuse(d, "value must be between 400 and 599");
    } else if (d.name === module.dryRun) {
      if (!["on", "off"].includes(arg.toLowerCase()))
        refuse(d, `invalid value "${arg}" in "${d.name}" directive, it must be "on" or "off"`);
    } else if (!LOG_LEVELS.includes(arg.toLowerCase())) {
      refuse(d, `invalid value "${arg}" (one of ${LOG_LEVELS.join(", ")})`);
    }
  }
}

/** `limit_req_zone KEY zone=NAME:SIZE rate=N[r/s|r/m]` or `limit_conn_zone KEY zone=NAME:SIZE`: the zone's name. */
function zoneParams(d: Directive, module: Module): string {
  let name = "";
  for (const p of d.args.slice(1, d.args.at(-1) === "sync" ? -1 : undefined)) {
    if (p.startsWith("zone=")) {
      const colon = p.indexOf(":");
      if (colon < 0) refuse(d, `invalid zone size "${p}"`);
      const size = nginxSize(p.slice(colon + 1));
      if (size === null) refuse(d, `invalid zone size "${p}"`);
      if (size < MIN_ZONE_BYTES) refuse(d, `zone "${p}" is too small (at least 32k)`);
      name = p.slice(5, colon);
    } else if (module.limit === "limit_req" && p.startsWith("rate=")) {
      if (nginxRate(p) === null) refuse(d, `invalid rate "${p}"`);
    } else {
      refuse(d, `invalid parameter "${p}"`);
    }
  }
  if (name === "") refuse(d, `"${d.name}" must have "zone" parameter`);
  return name;
}

/** `rate=N`, `rate=Nr/s` or `rate=Nr/m` as NGINX reads it (no unit is per second); `null` where it refuses. */
export function nginxRate(p: string): { amount: bigint; unit: "s" | "min" } | null {
  const unit = p.endsWith("r/m") ? "min" : "s";
  const digits = p.slice(5, p.endsWith("r/s") || p.endsWith("r/m") ? -3 : undefined);
  const n = nginxInt(digits);
  return n === null || n === 0n ? null : { amount: n, unit };
}

/** `limit_req zone=NAME [burst=N] [delay=N | nodelay]`: the zones its `zone=` name (NGINX registers each). */
function limitReqZones(d: Directive): string[] {
  const names: string[] = [];
  for (const p of d.args) {
    if (p.startsWith("zone=")) names.push(p.slice(5));
    else if (p.startsWith("burst=") || p.startsWith("delay=")) {
      const n = nginxInt(p.slice(6));
      if (n === null || n === 0n) refuse(d, `invalid ${p.slice(0, 5)} value "${p}"`);
    } else if (p !== "nodelay") refuse(d, `invalid parameter "${p}"`);
  }
  if (names.length === 0) refuse(d, `"${d.name}" must have "zone" parameter`);
  return names;
}

/** `limit_conn NAME N`: the zone's name. */
function limitConnZone(d: Directive): string {
  const n = nginxInt(d.args[1]!);
  if (n === null || n === 0n) refuse(d, `invalid number of connections "${d.args[1]}"`);
  if (n > 65535n) refuse(d, "connection limit must be less 65536");
  return d.args[0]!;
}
