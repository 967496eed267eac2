/**
 * What Envoy descriptors mean to Sluice. A descriptor's values come from Envoy's route actions, which the imported
 * files do not contain, so a small mapping (`--map`) says what each descriptor key stands for: a per-client identity,
 * a route, a plan, or any request. A descriptor chain becomes a rule's match through it.
 */
import { compileRoute } from "../rules/route.ts";
import type { DraftRule, ReportItem } from "./report.ts";

/** What a descriptor key (or key and value) stands for. */
export type Meaning =
  | { readonly kind: "identity"; readonly identity: "api_key" | "ip" | "user" }
  | { readonly kind: "route"; readonly route: string }
  | { readonly kind: "plan"; readonly plan: string }
  | { readonly kind: "any" };

export type EnvoyMapping = ReadonlyMap<string, Meaning>;

/** `KEY=api_key|ip|user` or `KEY:VALUE=route:METHOD /path|plan:NAME|any`, parsed; or why not. */
export function parseMapping(specs: readonly string[]): { mapping: Map<string, Meaning> } | { error: string } {
  const mapping = new Map<string, Meaning>([["remote_address", { kind: "identity", identity: "ip" }]]);
  for (const spec of specs) {
    const eq = spec.indexOf("=");
    if (eq <= 0) return { error: `--map ${JSON.stringify(spec)}: expected KEY=IDENTITY or KEY:VALUE=MEANING` };
    const target = spec.slice(0, eq);
    const meaning = spec.slice(eq + 1);
    if (meaning === "api_key" || meaning === "ip" || meaning === "user") {
      mapping.set(target, { kind: "identity", identity: meaning });
    } else if (meaning === "any") {
      mapping.set(target, { kind: "any" });
    } else if (meaning.startsWith("plan:") && meaning.length > 5) {
      mapping.set(target, { kind: "plan", plan: meaning.slice(5) });
    } else if (meaning.startsWith("route:")) {
      const route = compileRoute(meaning.slice(6));
      if ("error" in route) return { error: `--map ${target}: route ${route.error}` };
      mapping.set(target, { kind: "route", route: route.source });
    } else {
      return {
        error: `--map ${target}: expected api_key, ip, user, any, plan:NAME or route:METHOD /path, got ${JSON.stringify(meaning)}`,
      };
    }
  }
  return { mapping };
}

/** One (key, value) step of a descriptor chain, and where it is. */
export interface Step {
  readonly key: string;
  readonly value: string | null;
  readonly line: number;
}

// long: each descriptor step's meaning, checked in chain order with its own message
/** The rule's match from a descriptor chain through the mapping, or `null` (reported) when it has no single identity. */
export function matchOf(
  steps: readonly Step[],
  chainText: string,
  where: string,
  mapping: EnvoyMapping,
  report: ReportItem[],
): { match: DraftRule["match"]; notes: string[] } | null {
  let identity: string | null = null;
  let route: string | undefined;
  let plan: string | undefined;
  const notes: string[] = [];
  const approximations: ReportItem[] = [];
  for (const step of steps) {
    const meaning = step.value === null ? mapping.get(step.key) : (mapping.get(`${step.key}:${step.value}`) ?? null);
    if (step.value === null && meaning === undefined) {
      report.push({
        where,
        kind: "left out",
        message: `${chainText}: no meaning for descriptor key ${step.key}: give --map ${step.key}=api_key, ip or user`,
      });
      return null;
    }
    if (meaning === null || meaning === undefined) {
      const message = `${step.key}=${step.value} comes from an Envoy route action: mapped to every request (give --map ${step.key}:${step.value}=route:METHOD /path for one route)`;
      approximations.push({ where, kind: "approximate", message: `${chainText}: ${message}` });
      notes.push(`approximate: ${message}`);
      continue;
    }
    if (meaning.kind === "identity") {
      if (step.value !== null) {
        report.push({
          where,
          kind: "left out",
          message: `${chainText}: a limit for one ${step.key} value (${step.value}): Sluice rules count every caller alike`,
        });
        return null;
      }
      if (identity !== null) {
        report.push({
          where,
          kind: "left out",
          message: `${chainText}: counted by two identities at once (${identity} and ${meaning.identity})`,
        });
        return null;
      }
      identity = meaning.identity;
    } else if (meaning.kind === "route") route = meaning.route;
    else if (meaning.kind === "plan") plan = meaning.plan;
  }
  if (identity === null) {
    report.push({
      where,
      kind: "left out",
      message: `${chainText}: one budget shared by every client; Sluice counts per API key, address or user`,
    });
    return null;
  }
  report.push(...approximations);
  return {
    match: { ...(plan === undefined ? {} : { plan }), ...(route === undefined ? {} : { route }), identity },
    notes,
  };
}
