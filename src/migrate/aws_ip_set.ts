/**
 * AWS WAF IP sets, which a web ACL names by ARN only: `--ip-set FILE` gives each one's addresses as `aws wafv2
 * get-ip-set` prints them ({"IPSet": {"ARN", "Name", "Addresses", "IPAddressVersion"}}), and an
 * IPSetReferenceStatement becomes `match.address` (its NOT `match.except_address`). Without the set's file, the rule
 * is left out, saying how to get it.
 */
import { parseAddressRange } from "../rules/address_range.ts";
import type { Finding, Scoped } from "./aws_field.ts";
import {
  AwsImportError,
  field,
  here,
  isObject,
  isString,
  isStrings,
  type Obj,
  type Place,
  required,
} from "./aws_file.ts";
import { readJsonFile } from "./json_file.ts";

/** One IP set: its ARN, its name, its ranges, and where its file holds it. */
export interface IpSet {
  readonly arn: string;
  readonly name: string;
  readonly addresses: readonly string[];
  readonly at: string;
}

/** A web ACL's place with the IP sets given beside it, by ARN. */
export type PlaceWithSets = Place & { readonly ipSets?: ReadonlyMap<string, IpSet> };

/** An IP set file, each range checked as AWS checks it (CIDR notation, of the set's version). */
export function readIpSet(text: string, file: string): IpSet {
  const place = readJsonFile(text, file, AwsImportError);
  const root = place.json.value;
  const set = isObject(root) && isObject(root.IPSet) ? root.IPSet : root;
  if (!isObject(set))
    throw new AwsImportError(
      `${file}:${place.json.start.line}:${place.json.start.col}: expected an IP set ({"IPSet": {...}} as aws wafv2 get-ip-set prints it)`,
    );
  const arn = required(place, set, "ARN", "IPSet", isString, "a string");
  const name = field(place, set, "Name", "IPSet", isString, "a string") ?? arn;
  const addresses = required(place, set, "Addresses", "IPSet", isStrings, "a list of CIDR ranges");
  const version = field(place, set, "IPAddressVersion", "IPSet", isString, "IPV4 or IPV6");
  addresses.forEach((a, i) => {
    const range = parseAddressRange(a);
    const v4 = /^\d+\.\d+\.\d+\.\d+(?:\/\d+)?$/.test(a.trim());
    const why =
      "error" in range
        ? range.error
        : version !== undefined && (version === "IPV4") !== v4
          ? `an ${version} set holds ${version === "IPV4" ? "IPv4" : "IPv6"} ranges only`
          : null;
    if (why !== null) throw new AwsImportError(`${here(place, addresses, i)}: IPSet.Addresses[${i}]: ${why}`);
  });
  return { arn, name, addresses, at: here(place, set) };
}

/** An IPSetReferenceStatement: the set's ranges as `match.address`, or why not. */
export function ipSetTest(place: PlaceWithSets, body: Obj, path: string, at: string): Scoped {
  const arn = required(place, body, "ARN", path, isString, "a string");
  const set = place.ipSets?.get(arn);
  if (set === undefined)
    return {
      refused: `${path}: the IP set ${arn} is kept in AWS: give its addresses with --ip-set FILE (aws wafv2 get-ip-set --scope SCOPE --name NAME --id ID > FILE)`,
      at,
    };
  if (set.addresses.length === 0)
    return { refused: `${path}: the IP set ${set.name} is empty: it matches no request`, at };
  const notes: Finding[] = [
    { kind: "note", message: `${path}: the IP set ${set.name} (${set.at}), ${set.addresses.length} range(s)`, at },
  ];
  if (field(place, body, "IPSetForwardedIPConfig", path, isObject, "an object") !== undefined)
    notes.push({
      kind: "approximate",
      message: `${path}.IPSetForwardedIPConfig: AWS reads the address from a forwarded header; Sluice the connecting client (CF-Connecting-IP)`,
      at: here(place, body, "IPSetForwardedIPConfig"),
    });
  return { routes: null, except: [], conditions: [], notes, addresses: set.addresses };
}
