/**
 * What one isolate serves: the deployed rules, validated at build time (`sluice compile` -> src/generated/rules.ts)
 * and compiled for matching once, and the isolate's state (isolate.ts), made once when the isolate loads this module.
 * The gateway (index.ts) and the service binding (entrypoint.ts) share both.
 */
import { DENY_RULES, RULES, RULES_VERSION } from "../generated/rules.ts";
import { createIsolate } from "../isolate/isolate.ts";
import { compileDenies, compileRules } from "../request/match.ts";

export const DEPLOYED_RULES = compileRules(RULES, RULES_VERSION);
export const DEPLOYED_DENIES = compileDenies(DENY_RULES);
export const ISOLATE = createIsolate();
