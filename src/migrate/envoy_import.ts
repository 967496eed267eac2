/**
 * `sluice import envoy`: Envoy's rate limits as Sluice rules, from either
 * - the envoyproxy/ratelimit service's configuration (`domain`, nested `descriptors` of `key`/`value`, `rate_limit`
 *   with `unit` and `requests_per_unit`, `unlimited`, `name`, `replaces`, `shadow_mode`): envoy_service.ts, or
 * - the local rate limit filter (`token_bucket` with `max_tokens`, `tokens_per_fill`, `fill_interval`;
 *   `filter_enabled`/`filter_enforced`; `descriptors`): envoy_local.ts.
 * What each descriptor key stands for comes from a small mapping (envoy_mapping.ts): `remote_address` is the client
 * address unless told otherwise. docs/rules.md, "Coming from Envoy", describes the mapping.
 */
import { EnvoyImportError, isObject, load } from "./envoy_file.ts";
import { importLocal, localFilters } from "./envoy_local.ts";
import type { EnvoyMapping } from "./envoy_mapping.ts";
import { importService } from "./envoy_service.ts";
import type { DraftRule, ImportResult, ReportItem } from "./report.ts";

export function importEnvoy(text: string, file: string, mapping: EnvoyMapping): ImportResult {
  const loaded = load(text, file);
  const root = loaded.value;
  if (isObject(root) && "domain" in root) return importService(root, file, loaded, mapping);
  const filters = localFilters(root);
  if (filters.length === 0) {
    throw new EnvoyImportError(
      `${file}: neither a ratelimit service configuration (domain, descriptors) nor a local rate limit filter (token_bucket)`,
    );
  }
  const report: ReportItem[] = [];
  const rules: DraftRule[] = [];
  const taken = new Set<string>();
  for (const filter of filters) rules.push(...importLocal(filter, file, loaded, mapping, report, taken));
  return { rules, report };
}
