/**
 * What the envoyproxy/ratelimit service refuses to load, checked before `sluice import envoy` reads its configuration:
 * a file the service would not load limits nothing, and importing it would make rules of something that never ran.
 * The checks are the service's own (src/config/config_impl.go, read at commit f2fb157), in its order: every key of
 * the file known (`validateYamlKeys`: `metadata` aside, a list holds mappings, a value is text, a whole number, a
 * boolean or nothing, never a float); each field of the type its Go struct gives it (gopkg.in/yaml.v2: a boolean
 * field takes only a boolean, `requests_per_unit` a whole number from 0 to 2^32-1); then `loadConfig` and
 * `loadDescriptors`: a domain, a key for every descriptor, no two descriptors of one level with the same `key_value`,
 * a known unit (none with `unlimited`), `replaces` naming another limit, `share_threshold` only with a wildcard.
 */
import { EnvoyImportError, GoFloat, isObject, type Loaded, type Obj } from "./envoy_file.ts";

const VALID_KEYS = new Set([
  "domain",
  "key",
  "value",
  "descriptors",
  "rate_limit",
  "unit",
  "requests_per_unit",
  "unlimited",
  "shadow_mode",
  "quota_mode",
  "name",
  "replaces",
  "detailed_metric",
  "value_to_metric",
  "share_threshold",
  "metadata",
]);

/** The service's units (the rate limit protocol's `Unit` enum, read upper-cased), UNKNOWN aside. */
export const SERVICE_UNITS = ["second", "minute", "hour", "day", "week", "month", "year"];

const DESCRIPTOR_BOOLS = ["shadow_mode", "quota_mode", "detailed_metric", "value_to_metric", "share_threshold"];
const UINT32_MAX = 2 ** 32 - 1;

/** Refuse the first thing, in the service's reading order, that makes it refuse the configuration. */
export function checkService(root: Obj, file: string, loaded: Loaded): void {
  const refuse = (node: object, why: string): never => {
    const line = node instanceof GoFloat ? node.line : loaded.lineOf(node);
    throw new EnvoyImportError(
      `${file}:${line}: ${why}; the ratelimit service refuses this configuration, so it is not imported`,
    );
  };
  validateKeys(root, refuse);
  typed(root, refuse);
  if (root.domain === undefined || root.domain === null || String(root.domain) === "")
    refuse(root, "config file cannot have empty domain");
  descriptors(root.descriptors, refuse);
}

type Refuse = (node: object, why: string) => never;

/** The service's `validateYamlKeys`: known keys, lists of mappings, and leaves of text, whole numbers or booleans. */
function validateKeys(map: Obj, refuse: Refuse): void {
  for (const [k, v] of Object.entries(map)) {
    if (!VALID_KEYS.has(k)) refuse(map, `config error, unknown key '${k}'`);
    if (k === "metadata") continue;
    if (v instanceof GoFloat)
      refuse(v, `config error, ${k}: ${v.source} is a ${v.type === "float64" ? "float" : "number above 2^63-1"}`);
    if (Array.isArray(v)) {
      for (const e of v) {
        if (!isObject(e) || e instanceof GoFloat)
          refuse(v, `config error, ${k}: a list of something other than mappings (${JSON.stringify(e)})`);
        validateKeys(e, refuse);
      }
    } else if (isObject(v)) validateKeys(v, refuse);
  }
}

/** yaml.v2's typed reading: a field's value must have the type the service's struct gives the field. */
function typed(root: Obj, refuse: Refuse): void {
  const text = (m: Obj, k: string) => {
    const v = m[k];
    if (v !== undefined && v !== null && typeof v === "object")
      refuse(m, `${k}: cannot unmarshal a ${kindOf(v)} into a string`);
  };
  const bool = (m: Obj, k: string) => {
    const v = m[k];
    if (v !== undefined && v !== null && typeof v !== "boolean")
      refuse(m, `${k}: cannot unmarshal ${JSON.stringify(v)} into a boolean (true or false)`);
  };
  const list = (m: Obj, k: string) => {
    const v = m[k];
    if (v !== undefined && v !== null && !Array.isArray(v))
      refuse(m, `${k}: cannot unmarshal a ${kindOf(v)} into a list`);
  };
  const map = (m: Obj, k: string) => {
    const v = m[k];
    if (v !== undefined && v !== null && !isObject(v))
      refuse(m, `${k}: cannot unmarshal a ${kindOf(v)} into a mapping`);
  };
  const descriptor = (d: Obj) => {
    text(d, "key");
    text(d, "value");
    map(d, "rate_limit");
    list(d, "descriptors");
    for (const k of DESCRIPTOR_BOOLS) bool(d, k);
    map(d, "metadata");
    const rl = d.rate_limit;
    if (isObject(rl)) {
      const n = rl.requests_per_unit;
      if (n !== undefined && n !== null && !(typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= UINT32_MAX))
        refuse(
          rl,
          `requests_per_unit: cannot unmarshal ${JSON.stringify(n)} into a whole number from 0 to ${UINT32_MAX}`,
        );
      text(rl, "unit");
      bool(rl, "unlimited");
      text(rl, "name");
      list(rl, "replaces");
      for (const r of Array.isArray(rl.replaces) ? rl.replaces : []) if (isObject(r)) text(r, "name");
    }
    for (const child of Array.isArray(d.descriptors) ? d.descriptors : []) if (isObject(child)) descriptor(child);
  };
  text(root, "domain");
  list(root, "descriptors");
  for (const d of Array.isArray(root.descriptors) ? root.descriptors : []) if (isObject(d)) descriptor(d);
}

function kindOf(v: unknown): string {
  return Array.isArray(v) ? "list" : isObject(v) ? "mapping" : typeof v;
}

/** The service's `loadDescriptors`, one level: keys, duplicates, units, `replaces`, `share_threshold`; then below. */
function descriptors(list: unknown, refuse: Refuse): void {
  if (!Array.isArray(list)) return;
  const seen = new Set<string>();
  for (const d of list as Obj[]) {
    const key = d.key === undefined || d.key === null ? "" : String(d.key);
    if (key === "") refuse(d, "descriptor has empty key");
    const value = d.value === undefined || d.value === null ? "" : String(d.value);
    const finalKey = value === "" ? key : `${key}_${value}`;
    if (seen.has(finalKey))
      refuse(d, `duplicate descriptor composite key '${finalKey}' (two descriptors of one level)`);
    seen.add(finalKey);
    const rl = d.rate_limit;
    if (isObject(rl)) {
      const unit = rl.unit === undefined || rl.unit === null ? "" : String(rl.unit).toLowerCase();
      const validUnit = SERVICE_UNITS.includes(unit);
      if (rl.unlimited === true && validUnit) refuse(rl, "should not specify rate limit unit when unlimited");
      if (rl.unlimited !== true && !validUnit)
        refuse(rl, `invalid rate limit unit '${rl.unit ?? ""}' (${SERVICE_UNITS.join(", ")})`);
      for (const r of Array.isArray(rl.replaces) ? (rl.replaces as Obj[]) : []) {
        const name = r.name === undefined || r.name === null ? "" : String(r.name);
        if (name === "") refuse(r, "should not have an empty replaces entry");
        if (name === String(rl.name ?? "")) refuse(r, "replaces should not contain name of same descriptor");
      }
    }
    if (d.share_threshold === true && !finalKey.includes("*"))
      refuse(d, `share_threshold can only be used with wildcard values (containing '*'), but found key '${finalKey}'`);
    descriptors(d.descriptors, refuse);
  }
}
