/**
 * The region a request came in through, as one of the nine Durable Object location hints (`wnam enam sam weur eeur
 * apac oc afr me`), from `request.cf` (its continent, and its longitude or country where a continent holds two): the
 * region whose delegate a hot key's batches go to (src/object/delegate.ts). `null` where `cf` says nothing (local
 * development, the service binding): one delegate, placed by the runtime.
 */

export type Region = "wnam" | "enam" | "sam" | "weur" | "eeur" | "apac" | "oc" | "afr" | "me";

export const REGIONS: readonly Region[] = ["wnam", "enam", "sam", "weur", "eeur", "apac", "oc", "afr", "me"];

/** Countries of the Middle East (ISO 3166-1 alpha-2), placed in `me` rather than `apac` or `eeur`. */
const MIDDLE_EAST = new Set(["AE", "BH", "IL", "IQ", "IR", "JO", "KW", "LB", "OM", "PS", "QA", "SA", "SY", "TR", "YE"]);

/** What of `request.cf` this reads. */
export interface CfFacts {
  readonly continent?: unknown;
  readonly country?: unknown;
  readonly longitude?: unknown;
}

export function regionOf(cf: CfFacts | undefined | null): Region | null {
  if (cf === undefined || cf === null) return null;
  const continent = typeof cf.continent === "string" ? cf.continent : null;
  const country = typeof cf.country === "string" ? cf.country : null;
  const longitude = typeof cf.longitude === "string" || typeof cf.longitude === "number" ? Number(cf.longitude) : NaN;
  if (country !== null && MIDDLE_EAST.has(country)) return "me";
  switch (continent) {
    case "NA":
      return Number.isFinite(longitude) && longitude < -100 ? "wnam" : "enam";
    case "SA":
      return "sam";
    case "EU":
      return Number.isFinite(longitude) && longitude >= 20 ? "eeur" : "weur";
    case "AS":
      return "apac";
    case "OC":
    case "AN":
      return "oc";
    case "AF":
      return "afr";
    default:
      return null;
  }
}
