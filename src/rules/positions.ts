/**
 * Where a rule's field is in its YAML file (`7:9`, 1-based line and column), for messages about `key:`, its parts
 * (`key[2].ip.v4`), `key_missing`, `key_client_chosen` and `match.header`, `match.cookie` and `match.query`, and for a rule's own problems (not a mapping, its id, a
 * field it lacks: at the rule, or at the deepest part present). An unknown key points at the key; any other message
 * at the value. So do the messages about a key beside `match.identity` or inside `match`, and about `unverified`
 * without an `api_key` part. Other fields' messages name the rule and the field only.
 */
import { type Document, isAlias, isMap, isScalar, isSeq, type Node } from "yaml";
import type { Locate } from "./parse.ts";

/** The fields whose messages carry a position. */
const LOCATED = /^(?:key(?:$|[[.]|_missing$|_client_chosen$)|match\.key$|match\.[a-z_]+(?:$|[[.]))/;

/** Messages of other fields that are about `key:` (its short form given beside it, `unverified` without `api_key`). */
const ABOUT_KEY = /^(?:give match\.identity or key|only rules whose key has)/;

/** A rule's own problems (field `""`: the rule; its id; a field it lacks), which name no field present to find. */
const ruleLevel = (field: string, message: string) => field === "" || field === "id" || message.startsWith("required");

/** A field path as its steps: `key[2].ip.v4` -> `key`, 2, `ip`, `v4`. */
function steps(field: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const m of field.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) out.push(m[2] === undefined ? m[1]! : Number(m[2]));
  return out;
}

export function yamlLocator(doc: Document, text: string): Locate {
  const lineStarts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === "\n") lineStarts.push(i + 1);
  const position = (offset: number) => {
    let line = 0;
    while (line + 1 < lineStarts.length && lineStarts[line + 1]! <= offset) line++;
    return `${line + 1}:${offset - lineStarts[line]! + 1}`;
  };
  return (index, field, message) => {
    if (!LOCATED.test(field) && !ABOUT_KEY.test(message) && !ruleLevel(field, message)) return null;
    const unknownKey = /^unknown key(?:;|$| \()/.test(message);
    let node: unknown = isSeq(doc.contents) ? doc.contents.items[index] : undefined;
    let found: Node | null = node as Node | null;
    for (const step of steps(field)) {
      if (isAlias(node)) node = node.resolve(doc);
      if (typeof step === "number") node = isSeq(node) ? node.items[step] : undefined;
      else if (isMap(node)) {
        const pair = node.items.find((p) => isScalar(p.key) && p.key.value === step);
        if (pair !== undefined && unknownKey && step === steps(field).at(-1)) node = pair.key;
        else node = pair?.value;
      } else node = undefined;
      if (node === undefined || node === null) break;
      found = node as Node;
    }
    const range = found?.range;
    return range === undefined || range === null ? null : position(range[0]);
  };
}
