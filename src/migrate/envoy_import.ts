/**
 * `sluice import envoy`: Envoy's rate limits as Sluice rules, from either
 * - the envoyproxy/ratelimit service's configuration (`domain`, nested `descriptors` of `key`/`value`, `rate_limit`
 *   with `unit` and `requests_per_unit`, `unlimited`, `name`, `replaces`, `shadow_mode`): envoy_service.ts, or
 * - the local rate limit filter (`token_bucket` with `max_tokens`, `tokens_per_fill`, `fill_interval`;
 *   `filter_enabled`/`filter_enforced`; `descriptors`): envoy_local.ts.
 * What each descriptor key stands for comes from a small mapping (envoy_mapping.ts): `remote_address` is the client
 * address unless told otherwise; the route actions of an Envoy configuration (this file's, or `--envoy FILE`'s) say
 * what the rest mean (envoy_actions.ts). docs/rules.md, "Coming from Envoy", describes the mapping.
 */
import { actionMeanings, type Sends, sentShapes } from "./envoy_actions.ts";
import { EnvoyImportError, isObject, type Loaded, load, loadAll, type Obj } from "./envoy_file.ts";
import { globalFilters } from "./envoy_filter.ts";
import { importLocal, localFilters } from "./envoy_local.ts";
import { localScopes } from "./envoy_local_scope.ts";
import { type EnvoyMapping, type Meaning, parseMapping } from "./envoy_mapping.ts";
import { importService } from "./envoy_service.ts";
import type { DraftRule, ImportResult, ReportItem } from "./report.ts";

/**
 * `routes`: the documents of an Envoy configuration (`--envoy FILE`) whose route actions say what descriptors mean;
 * the file's own routes are read too. `--map` wins over both.
 */
export function importEnvoy(text: string, file: string, mapping: EnvoyMapping, routes: unknown = null): ImportResult {
  const loaded = load(text, file);
  const meanings = withActions(mapping, [loaded.value, routes], routes !== null);
  const services = serviceConfigs(loaded, file, text);
  if (services.length > 0) {
    const sends = sentChains(mapping, [loaded.value, routes]);
    const filters = globalFilters([loaded.value, routes]);
    const results = services.map((s) => importService(s.root, s.file, s.loaded, meanings, sends, filters));
    return { rules: results.flatMap((r) => r.rules), report: results.flatMap((r) => r.report) };
  }
  const filters = localFilters(loaded.value);
  if (filters.length === 0) {
    if (JSON.stringify(loaded.value ?? null).includes("envoy.filters.http.ratelimit")) {
      throw new EnvoyImportError(
        `${file}: an Envoy configuration with the global rate limit filter (envoy.filters.http.ratelimit): its limits are in the ratelimit service's configuration; import that file, with this one giving its routes' actions: sluice import envoy ratelimit.yaml --envoy ${file}`,
      );
    }
    throw new EnvoyImportError(
      `${file}: neither a ratelimit service configuration (domain, descriptors) nor a local rate limit filter (token_bucket)`,
    );
  }
  const report: ReportItem[] = [];
  const rules: DraftRule[] = [];
  const taken = new Set<string>();
  const scopeOf = localScopes(loaded.value);
  for (const filter of filters)
    rules.push(...importLocal(filter, file, loaded, meanings, report, taken, scopeOf(filter)));
  return { rules, report };
}

/** The mapping with what route actions say added: `--map` first, then the actions, then the defaults. */
// With Envoy's routes known, a descriptor no action sends is one Envoy never sends: its limit never applies.
function withActions(mapping: EnvoyMapping, roots: readonly unknown[], routesGiven: boolean): EnvoyMapping {
  const defaults = parseMapping([]);
  const fallback = "mapping" in defaults ? defaults.mapping : new Map<string, Meaning>();
  const isDefault = (key: string) => JSON.stringify(mapping.get(key)) === JSON.stringify(fallback.get(key));
  const out = new Map(mapping);
  const actions = actionMeanings(roots);
  for (const [key, meaning] of actions) {
    if (mapping.get(key) === undefined || isDefault(key)) out.set(key, meaning);
  }
  if (!routesGiven && actions.size === 0) return out;
  for (const key of fallback.keys()) if (isDefault(key) && !actions.has(key)) out.delete(key);
  out.set("*", {
    kind: "refused",
    why: "no rate_limits action in the Envoy configuration given sends it, so Envoy never applies this limit (give --map to say what it means anyway)",
  });
  return out;
}

/**
 * Whether Envoy sends a descriptor of a chain's very keys, with the routes known (`null`: not known): `always`, only
 * for requests missing some headers or query parameters (`skip_if_absent` dropped their entries: `{ absent }`), or
 * never (`false`). The service applies a limit only to a descriptor exactly as deep as its chain, so `client_id` alone
 * is never limited when every action list sends `client_id` with `path`. A chain with a key given by `--map` is taken
 * as sent.
 */
function sentChains(mapping: EnvoyMapping, roots: readonly unknown[]): Sends | null {
  const shapes = sentShapes(roots);
  if (shapes === null) return null;
  const defaults = parseMapping([]);
  const fallback = "mapping" in defaults ? defaults.mapping : new Map<string, Meaning>();
  const byHand = (key: string) =>
    [...mapping.keys()].some(
      (k) =>
        (k === key || k.startsWith(`${key}:`)) && JSON.stringify(mapping.get(k)) !== JSON.stringify(fallback.get(k)),
    );
  return (steps) => {
    const matching = shapes.filter(
      (shape) => shape.keys.length === steps.length && shape.keys.every((k, i) => k === "?" || k === steps[i]!.key),
    );
    if (matching.length === 0) return steps.some((s) => byHand(s.key)) ? { absent: [], hits: 1, notes: [] } : false;
    // Sent whatever the request holds by some entry, or only without some header: of the shapes, the one asking least.
    const least = matching.reduce((a, b) => (b.absent.length < a.absent.length ? b : a));
    const hits = matching.every((m) => m.hits !== null && m.hits === matching[0]!.hits) ? matching[0]!.hits : null;
    return { absent: least.absent, hits, notes: [...new Set(matching.flatMap((m) => m.notes))] };
  };
}

/**
 * The service configurations in a file: the file itself, a document of it, or a ConfigMap's data holding one; each
 * read as the service reads it (envoy_file.ts `go-yaml-v2`), the file around them as Kubernetes and Envoy read it.
 */
function serviceConfigs(loaded: Loaded, file: string, text: string): { root: Obj; file: string; loaded: Loaded }[] {
  // A file of `descriptors` with keys and no domain is a service configuration too (the service: "empty domain");
  // a descriptor (it has a `key`) is not.
  const isService = (v: unknown): v is Obj =>
    isObject(v) &&
    ("domain" in v ||
      (!("token_bucket" in v) &&
        !("key" in v) &&
        "descriptors" in v &&
        (v.descriptors === null ||
          (Array.isArray(v.descriptors) && v.descriptors.every((d) => isObject(d) && "key" in d)))));
  const asService = (source: string, name: string): { root: Obj; file: string; loaded: Loaded }[] => {
    const read = load(source, name, "go-yaml-v2");
    return isObject(read.value) ? [{ root: read.value, file: name, loaded: read }] : [];
  };
  if (isService(loaded.value)) return asService(text, file);
  // The documents of the file (a Kubernetes manifest's, between `---` lines), each read again as the service would.
  const docs = loadAll(text, file);
  const out: { root: Obj; file: string; loaded: Loaded }[] = [];
  docs.forEach(({ value: doc }, i) => {
    if (isService(doc)) {
      const read = loadAll(text, file, "go-yaml-v2")[i];
      if (read !== undefined && isObject(read.value)) out.push({ root: read.value, file, loaded: read });
    }
    if (!isObject(doc) || doc.kind !== "ConfigMap" || !isObject(doc.data)) return;
    for (const [name, inner] of Object.entries(doc.data)) {
      if (typeof inner !== "string" || !/^domain:/m.test(inner)) continue;
      const where = `${file} (ConfigMap data ${name})`;
      if (isService(load(inner, where).value)) out.push(...asService(inner, where));
    }
  });
  return out;
}
