/**
 * The `_method` fields of a `POST` body, read the way the upstream's framework reads them (upstream_profile.ts), and
 * never more than `BODY_READ_MAX_BYTES` of it: from a copy (`Request.clone`, a tee), so the upstream still receives
 * every byte, and only as far as the bound, so a large body is never held here (the copy is cancelled at the bound).
 * A body that cannot be read within the bound is `"unreadable"`: the caller counts it against every method `_method`
 * could name.
 */
import { BODY_READ_MAX_BYTES, type ProfileRules } from "./upstream_profile.ts";

const FORM = /^application\/x-www-form-urlencoded\s*(;|$)/i;
const MULTIPART = /^multipart\/form-data\s*(;|$)/i;
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(;|$)/i;
const DECODERS: Readonly<Record<string, "gzip" | "deflate">> = { gzip: "gzip", "x-gzip": "gzip", deflate: "deflate" };

/**
 * The `_method` values of `request`'s body, `[]` for a body the profile does not read, or `"unreadable"`.
 * `withheld`: the request stands for another whose body was not passed on (the binding's `check` without `body`):
 * a body its header fields announce is then unreadable (see below).
 */
export async function bodyMethods(
  request: Request,
  profile: ProfileRules,
  withheld = false,
): Promise<string[] | "unreadable"> {
  const type = (request.headers.get("content-type") ?? "").trim();
  const untyped = type === "" && profile.untypedIsForm;
  const kind =
    FORM.test(type) || untyped ? "form" : JSON_TYPE.test(type) ? "json" : MULTIPART.test(type) ? "multipart" : null;
  if (kind === null) return [];
  if (kind === "multipart") return profile.methodInBody.includes("form") ? "unreadable" : [];
  if (!profile.methodInBody.includes(kind)) return [];
  const length = Number(request.headers.get("content-length") ?? Number.NaN);
  if (withheld && request.body === null) {
    // Announced by its length, its chunked framing, or (a form or JSON type) by its type when no length is given.
    const announced = Number.isInteger(length) ? length > 0 : !untyped || request.headers.has("transfer-encoding");
    return announced ? "unreadable" : [];
  }
  if (request.body === null) return [];
  if (Number.isInteger(length) && length > BODY_READ_MAX_BYTES) return "unreadable";
  const coding = (request.headers.get("content-encoding") ?? "identity").trim().toLowerCase();
  // A framework that does not inflate bodies reads no `_method` from an encoded one: nothing to count.
  if (coding !== "identity" && !profile.decodesBody) return [];
  const format = coding === "identity" ? null : DECODERS[coding];
  // br (the runtime has no decoder for it), several codings, or one unknown: not readable here.
  if (format === undefined) return "unreadable";
  let stream = request.clone().body!;
  if (format !== null)
    stream = stream.pipeThrough(boundedBy(BODY_READ_MAX_BYTES)).pipeThrough(new DecompressionStream(format));
  const text = await readAtMost(stream, BODY_READ_MAX_BYTES);
  if (text === null) return "unreadable";
  return kind === "form" ? new URLSearchParams(text).getAll("_method") : jsonMethod(text);
}

/**
 * A JSON body's top-level `_method`: a string (as Laravel's and body-parser's readers take it), or an array's first
 * element when that is a string (method-override takes the first of several values; Laravel ignores an array).
 */
function jsonMethod(text: string): string[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return []; // not JSON: Laravel reads no fields from it, Express's parser refuses it (400)
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return [];
  const field = (value as Record<string, unknown>)._method;
  const method = Array.isArray(field) ? field[0] : field;
  return typeof method === "string" ? [method] : [];
}

/** The stream's text, or `null` when it holds more than `maxBytes` (or is not valid as encoded): then cancelled. */
async function readAtMost(stream: ReadableStream<Uint8Array>, maxBytes: number): Promise<string | null> {
  const reader = stream.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > maxBytes) {
        // Not awaited: a tee branch's cancel settles only once the other branch (the upstream's) is done too.
        void reader.cancel();
        return null;
      }
      parts.push(value);
    }
  } catch {
    return null; // a corrupt encoding: the framework cannot read it either, but which method it runs is not known
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.byteLength;
  }
  return new TextDecoder().decode(bytes);
}

/** Passes at most `maxBytes` through, then errors the stream: an encoded body is bounded before it is inflated. */
function boundedBy(maxBytes: number): TransformStream<Uint8Array, Uint8Array> {
  let total = 0;
  return new TransformStream({
    transform(chunk, controller) {
      total += chunk.byteLength;
      if (total > maxBytes) controller.error(new RangeError(`an encoded body over ${maxBytes} bytes`));
      else controller.enqueue(chunk);
    },
  });
}
