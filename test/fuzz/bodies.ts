/**
 * Bodies for the differential route fuzzer (routes.ts): `POST` bodies carrying `_method` in the ways clients and
 * attackers write it (JSON, urlencoded, no Content-Type, multipart; gzip, deflate, br, unknown codings; over the 64 KiB
 * bound), and the real Express 5 app's method override: method-override 3 by the query (`methodOverride('_method')`)
 * and by the body (the getter its README documents, after `express.json()` and `express.urlencoded()`).
 */
import { METHODS } from "node:http";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import type express from "express";
import type { ModelBody } from "./framework_models.ts";

/** A generated body, with a short name for the cache key and the messages. */
export interface FuzzBody extends ModelBody {
  readonly label: string;
}

const TYPES: readonly (string | null)[] = [
  "application/json",
  "application/json; charset=utf-8",
  "application/vnd.api+json",
  "application/x-www-form-urlencoded",
  "application/x-www-form-urlencoded; charset=UTF-8",
  null,
  "text/plain",
  "multipart/form-data; boundary=x",
];
const CODINGS: readonly (string | null)[] = [null, null, null, null, "gzip", "deflate", "br", "GZIP", "identity", "x"];

function jsonText(method: string, pick: <T>(xs: readonly T[]) => T): string {
  return pick([
    `{"_method":"${method}"}`,
    `{"a":1,"_method":"${method.toLowerCase()}"}`,
    `{"_method":["${method}"]}`,
    `{"_method":["${method}","PUT"]}`,
    `{"_method":{"m":"${method}"}}`,
    `[{"_method":"${method}"}]`,
    `\uFEFF{"_method":"${method}"}`,
    ` \n{"_method" : "${method}" }`,
    `{"_method":"${method}","_method":"PUT"}`,
    `{"pad":"${"x".repeat(70_000)}","_method":"${method}"}`,
  ]);
}

function formText(method: string, pick: <T>(xs: readonly T[]) => T): string {
  return pick([
    `_method=${method}`,
    `a=1&_method=${method.toLowerCase()}`,
    `_method=${method}&_method=PUT`,
    `_meth%6Fd=${method}`,
    `_method=${encodeURIComponent(method).replace(/E/, "%45")}`,
    `_method=+${method}`,
    `_method%5B%5D=${method}`,
    `pad=${"x".repeat(70_000)}&_method=${method}`,
  ]);
}

function encode(text: string, coding: string | null): Buffer {
  const bytes = Buffer.from(text, "utf8");
  switch ((coding ?? "identity").toLowerCase()) {
    case "gzip":
      return gzipSync(bytes);
    case "deflate":
      return deflateSync(bytes);
    case "br":
      return brotliCompressSync(bytes);
    default:
      return bytes;
  }
}

/** A random `POST` body naming `method` in `_method`. */
export function fuzzBody(method: string, pick: <T>(xs: readonly T[]) => T): FuzzBody {
  const contentType = pick(TYPES);
  const json = contentType !== null && /json/.test(contentType);
  const text = json ? jsonText(method, pick) : formText(method, pick);
  const contentEncoding = pick(CODINGS);
  const bytes = encode(text, contentEncoding);
  const shown = text.length > 60 ? `${text.slice(0, 30)}...(${text.length})` : text;
  const label = `${contentType ?? "no type"}, ${contentEncoding ?? "identity"}: ${JSON.stringify(shown)}`;
  return { contentType, contentEncoding, bytes, label };
}

const KNOWN = METHODS.map((m) => m.toLowerCase());

/** method-override 3's `supports` and the assignment it makes. */
function override(req: express.Request, value: unknown): void {
  const method = Array.isArray(value) ? value[0] : value;
  if (typeof method === "string" && KNOWN.includes(method.toLowerCase())) req.method = method.toUpperCase();
}

/** Express 5's body parsers and method-override 3 (query, then body), on `POST`s only, as its README wires them. */
export function useMethodOverride(app: express.Express, expressModule: typeof express): void {
  app.use(expressModule.json());
  app.use(expressModule.urlencoded());
  app.use((req, _res, next) => {
    const original = req.method;
    if (original !== "POST") return next();
    // methodOverride('_method'): the query string, parsed by querystring.
    const query = new URLSearchParams((req.originalUrl.split("?")[1] ?? "").replace(/\+/g, " "));
    const fromQuery = query.getAll("_method");
    if (fromQuery.length > 0) override(req, fromQuery);
    // methodOverride(getter): `req.body._method`, as the README's custom logic reads it.
    const body: unknown = req.body;
    if (typeof body === "object" && body !== null && "_method" in body) {
      override(req, (body as Record<string, unknown>)._method);
    }
    next();
  });
}
