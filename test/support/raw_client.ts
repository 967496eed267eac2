/**
 * An HTTP/1.1 client with control over the wire, for end-to-end tests of what a proxy forwards: the request-target
 * sent byte for byte, header lines as given, a body sent in one piece (with Content-Length) or in chunks
 * (`Transfer-Encoding: chunked`), `Expect: 100-continue` honoured; the response's header lines as they arrived.
 */
import { request as httpRequest } from "node:http";

export interface RawRequest {
  readonly method: string;
  /** The request-target: path and query exactly as to be sent. */
  readonly target: string;
  readonly headers: readonly (readonly [string, string])[];
  /** One buffer (sent with Content-Length), chunks (sent chunked), or none. */
  readonly body?: Buffer | readonly Buffer[];
  /** Send `Expect: 100-continue` and the body only after the 100. */
  readonly expectContinue?: boolean;
}

export interface RawResponse {
  readonly status: number;
  readonly rawHeaders: readonly (readonly [string, string])[];
  /** Header values by lower-case name; `set-cookie` lines kept apart in `setCookies`. */
  readonly headers: Readonly<Record<string, string>>;
  readonly setCookies: readonly string[];
  readonly body: Buffer;
  /** Whether the server answered 100 Continue before the final status. */
  readonly continued: boolean;
}

export function send(base: string, r: RawRequest, timeoutMs = 30_000): Promise<RawResponse> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const headers: [string, string][] = r.headers.map(([n, v]) => [n, v]);
    // Given as an array, header lines go out as given: Node adds no Host of its own then.
    if (!headers.some(([n]) => n.toLowerCase() === "host")) headers.unshift(["Host", url.host]);
    const chunked = Array.isArray(r.body);
    if (r.body !== undefined && !chunked) headers.push(["Content-Length", String((r.body as Buffer).length)]);
    if (chunked) headers.push(["Transfer-Encoding", "chunked"]);
    if (r.expectContinue === true) headers.push(["Expect", "100-continue"]);
    const req = httpRequest({
      host: url.hostname,
      port: url.port,
      method: r.method,
      path: r.target,
      headers: headers.flat(),
      agent: false,
      timeout: timeoutMs,
    });
    let continued = false;
    const writeBody = () => {
      if (r.body === undefined) req.end();
      else if (Array.isArray(r.body)) {
        for (const c of r.body as readonly Buffer[]) req.write(c);
        req.end();
      } else req.end(r.body as Buffer);
    };
    req.on("continue", () => {
      continued = true;
      writeBody();
    });
    req.on("timeout", () => req.destroy(new Error(`no answer from ${r.method} ${r.target} in ${timeoutMs} ms`)));
    req.on("error", reject);
    req.on("response", (res) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c));
      res.on("error", reject);
      res.on("end", () => {
        const rawHeaders: [string, string][] = [];
        for (let i = 0; i < res.rawHeaders.length; i += 2)
          rawHeaders.push([res.rawHeaders[i]!, res.rawHeaders[i + 1]!]);
        const byName: Record<string, string> = {};
        const setCookies: string[] = [];
        for (const [n, v] of rawHeaders) {
          const lower = n.toLowerCase();
          if (lower === "set-cookie") setCookies.push(v);
          else byName[lower] = lower in byName ? `${byName[lower]}, ${v}` : v;
        }
        resolve({
          status: res.statusCode ?? 0,
          rawHeaders,
          headers: byName,
          setCookies,
          body: Buffer.concat(parts),
          continued,
        });
      });
    });
    if (r.expectContinue !== true) writeBody();
    else req.flushHeaders();
  });
}
