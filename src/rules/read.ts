/**
 * Reading one rule-file value: the primitive readers every field uses, and the errors of one rule. A reader returns
 * the value, or `undefined` after reporting why it is invalid; bad input never throws.
 */
import { closest } from "./closest.ts";
import { MAX_AMOUNT } from "./duration.ts";
import { describe, type Raw } from "./raw.ts";

/** Where a rule's field (`key[2].ip.v4`) is, as the prefix of its messages, or `null` when not known. */
export type FieldPosition = (field: string, message: string) => string | null;

/**
 * The errors of one rule, each prefixed with the file and the rule's id (or `rules[i]`), and its warnings (a rule that
 * is valid but likely not what was meant: `sluice validate` and `compile` print them and go on).
 */
export class RuleErrors {
  count = 0;
  /** Keys an "unknown key; did you mean" message already named: a missing one is not reported a second time. */
  readonly suggested = new Set<string>();
  /** `at`: where a field is in the file, as a prefix that replaces `where` (`rules/a.yaml:7:9: a`), when known. */
  constructor(
    private readonly out: string[],
    private readonly where: string,
    private readonly warnings: string[] = [],
    private readonly at: FieldPosition = () => null,
  ) {}
  add(field: string, message: string): void {
    this.out.push(`${this.at(field, message) ?? this.where}.${field}: ${message}`);
    this.count++;
  }
  warn(field: string, message: string): void {
    this.warnings.push(`${this.at(field, message) ?? this.where}.${field}: warning: ${message}`);
  }
}

/** `parse(value)` when the key is present, else the default. `undefined` means invalid (already reported). */
export function optional<T>(
  raw: Map<string, Raw>,
  key: string,
  fallback: T,
  parse: (v: Raw | undefined) => T | undefined,
) {
  return raw.has(key) ? parse(raw.get(key)) : fallback;
}

export function positiveInt(e: RuleErrors, field: string, v: Raw | undefined): number | undefined {
  if (typeof v === "bigint" && v >= 1n) {
    if (v <= BigInt(MAX_AMOUNT)) return Number(v);
    e.add(field, `must be at most 2^50, got ${describe(v)}`);
    return undefined;
  }
  e.add(field, `must be a positive integer, got ${describe(v)}`);
  return undefined;
}

export function nonNegativeInt(e: RuleErrors, field: string, v: Raw | undefined): number | undefined {
  if (typeof v === "bigint" && v >= 0n) {
    if (v <= BigInt(MAX_AMOUNT)) return Number(v);
    e.add(field, `must be at most 2^50, got ${describe(v)}`);
    return undefined;
  }
  e.add(field, `must be an integer >= 0, got ${describe(v)}`);
  return undefined;
}

export function oneOf<T extends string>(
  e: RuleErrors,
  field: string,
  v: Raw | undefined,
  allowed: readonly T[],
): T | undefined {
  if (typeof v === "string" && (allowed as readonly string[]).includes(v)) return v as T;
  const guess = typeof v === "string" ? closest(v, allowed) : null;
  e.add(
    field,
    `must be one of ${allowed.join(", ")}, got ${describe(v)}${guess === null ? "" : `; did you mean "${guess}"?`}`,
  );
  return undefined;
}

export function unknownKey(key: string, known: readonly string[], fallback?: string, e?: RuleErrors): string {
  const guess = closest(key, known);
  if (guess !== null) e?.suggested.add(guess);
  if (guess !== null) return `unknown key; did you mean "${guess}"?`;
  return fallback === undefined ? "unknown key" : `unknown key (${fallback})`;
}

export function exceedsCapacity(cost: number, capacity: number, capacityName: string): string {
  return `cost ${cost} is more than the rule's capacity ${capacity} (${capacityName}); such a request could never be admitted`;
}
