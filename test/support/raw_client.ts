/**
 * An HTTP/1.1 client with control over the wire, for end-to-end tests of what a proxy forwards: the request-target
 * sent byte for byte, header lines as given, a body sent in one piece (with Content-Length) or in chunks
 * (`Transfer-Encoding: chunked`), `Expect: 100-continue` honoured; the response's header lines as they arrived.
 */
import { randomBytes } from "node:crypto";
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import type { Socket } from "node:net";

export interface RawRequest {
  readonly method: string;
  /** The request-target: path and query exactly as to be sent. */
  readonly target: string;
  readonly headers: readonly (readonly [string, string])[];
  /**
   * One buffer (sent with Content-Length), chunks (sent chunked), chunks produced as the test goes (chunked, each
   * written when the iterator yields it), or none.
   */
  readonly body?: Buffer | readonly Buffer[] | AsyncIterable<Buffer>;
  /**
   * Send `Expect: 100-continue`; `wait`: the body only after a 100 (Node's own behaviour, which never gives up);
   * `send`: the body right away, as curl does when no 100 came within its wait (and as RFC 9110 10.1.1 allows).
   */
  readonly expectContinue?: "wait" | "send";
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
    const chunked = r.body !== undefined && !Buffer.isBuffer(r.body);
    if (Buffer.isBuffer(r.body)) headers.push(["Content-Length", String(r.body.length)]);
    if (chunked) headers.push(["Transfer-Encoding", "chunked"]);
    if (r.expectContinue !== undefined) headers.push(["Expect", "100-continue"]);
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
      const body = r.body;
      if (body === undefined) req.end();
      else if (Buffer.isBuffer(body)) req.end(body);
      else if (Array.isArray(body)) {
        for (const c of body as readonly Buffer[]) req.write(c);
        req.end();
      } else void pump(body as AsyncIterable<Buffer>);
    };
    const pump = async (chunks: AsyncIterable<Buffer>) => {
      try {
        for await (const c of chunks) {
          if (!req.write(c)) await new Promise((drained) => req.once("drain", drained));
        }
        req.end();
      } catch (error) {
        req.destroy(error as Error);
      }
    };
    req.on("continue", () => {
      continued = true;
      if (r.expectContinue === "wait") writeBody();
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
    if (r.expectContinue !== "wait") writeBody();
    else req.flushHeaders();
  });
}

export interface WebSocketOpened {
  readonly status: 101;
  readonly headers: Readonly<Record<string, string>>;
  /** Send one text message (masked, as a client must) and wait for the origin's echo of it. */
  roundTrip(text: string): Promise<string>;
  close(): void;
}

export interface WebSocketRefused {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** Open a WebSocket to `target` (the RFC 6455 handshake by hand: Node 20 has no WebSocket client of its own). */
export function openWebSocket(
  base: string,
  target: string,
  headers: readonly (readonly [string, string])[],
): Promise<WebSocketOpened | WebSocketRefused> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: url.hostname,
      port: url.port,
      path: target,
      headers: {
        ...Object.fromEntries(headers),
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": randomBytes(16).toString("base64"),
      },
      agent: false,
      timeout: 30_000,
    });
    req.on("timeout", () => req.destroy(new Error(`no answer to the upgrade of ${target}`)));
    req.on("error", reject);
    req.on("response", (res) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: flatHeaders(res.headers),
          body: Buffer.concat(parts).toString(),
        }),
      );
    });
    req.on("upgrade", (res, socket: Socket) => {
      const waiting: ((text: string) => void)[] = [];
      socket.on("data", (frame: Buffer) => {
        const length = frame[1]! & 0x7f;
        waiting.shift()?.(frame.subarray(2, 2 + length).toString());
      });
      resolve({
        status: 101,
        headers: flatHeaders(res.headers),
        roundTrip: (text) =>
          new Promise((answered) => {
            waiting.push(answered);
            const payload = Buffer.from(text);
            const mask = randomBytes(4);
            const masked = payload.map((b, i) => b ^ mask[i % 4]!);
            socket.write(Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, masked]));
          }),
        close: () => socket.destroy(),
      });
    });
    req.end();
  });
}

function flatHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(", ") : value;
  return out;
}
