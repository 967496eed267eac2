/**
 * Cloudflare's custom IP lists, which an expression names (`ip.src in $office`) and a rule's JSON does not hold:
 * `--list NAME=FILE` gives each one's items as the Lists API returns them (`{"result": [{"ip": "203.0.113.0/24"},
 * ...]}`, or the bare list), and the expression's `$NAME` is read as those ranges (`match.address`).
 */
import type { Node, Value } from "./cloudflare_expr.ts";
import { CloudflareImportError } from "./cloudflare_file.ts";
import { here, isObject, kindOf, readJsonFile } from "./json_file.ts";

/** A list's items (addresses and CIDR ranges) as the expression would hold them, each checked where it is. */
export function readCloudflareList(text: string, file: string): string[] {
  const place = readJsonFile(text, file, CloudflareImportError);
  const root = place.json.value;
  const items = isObject(root) ? root.result : root;
  if (!Array.isArray(items))
    throw new CloudflareImportError(
      `${file}:${place.json.start.line}:${place.json.start.col}: expected a list's items ({"result": [{"ip": ...}]} as the Lists API returns them)`,
    );
  return items.map((item, i) => {
    const ip = isObject(item) ? item.ip : undefined;
    if (typeof ip !== "string") {
      const what = isObject(item)
        ? `an item without "ip" (a list of hostnames, ASNs or redirects is not an IP list)`
        : kindOf(item);
      throw new CloudflareImportError(
        `${here(place, items, i)}: result[${i}]: an IP list's item has "ip" (an address or a CIDR range), got ${what}`,
      );
    }
    return ip;
  });
}

/** `node` with each `$NAME` that `lists` gives read as its items. */
export function withLists(node: Node, lists: ReadonlyMap<string, readonly string[]>): Node {
  if (lists.size === 0) return node;
  switch (node.kind) {
    case "and":
    case "or":
    case "xor":
      return { ...node, items: node.items.map((n) => withLists(n, lists)) };
    case "not":
    case "any":
      return { ...node, item: withLists(node.item, lists) };
    case "compare": {
      const values = node.values.flatMap((v): Value[] => {
        const items = v.kind === "word" && v.text.startsWith("$") ? lists.get(v.text.slice(1)) : undefined;
        return items === undefined ? [v] : items.map((text) => ({ kind: "word", text }));
      });
      return { ...node, values };
    }
    default:
      return node;
  }
}
