/**
 * A real HTTP origin for end-to-end tests of what Sluice forwards: a plain `node:http` server on a free port of
 * 127.0.0.1 that records exactly what arrives (method, the request-target's bytes, every header line as sent, the
 * body's bytes and when its first and last chunks arrived), and answers as the request's `x-test-respond` header asks
 * (`respond` below), so the response direction is tested against a real server too.
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One request as the origin received it. */
export interface Received {
  readonly method: string;
  /** The request-target as sent on the wire (path and query, undecoded). */
  readonly target: string;
  /** Header lines in arrival order, names as sent. */
  readonly rawHeaders: readonly (readonly [string, string])[];
  /** Header values by lower-case name (several lines joined by ", "; set-cookie never arrives in a request). */
  readonly headers: Readonly<Record<string, string>>;
  readonly bodyBytes: number;
  readonly bodySha256: string;
  /** The body itself when at most 64 KiB, else `null` (only its length and hash are kept). */
  readonly body: Buffer | null;
  /** Whether the body arrived chunked (`Transfer-Encoding: chunked`). */
  readonly chunked: boolean;
}

export interface RecordingOrigin {
  /** `http://127.0.0.1:<port>` */
  readonly base: string;
  readonly port: number;
  /** Every request received, oldest first. */
  readonly received: Received[];
  /** Requests whose body is being read now: their first byte arrived, their last not yet (`x-test-id` header). */
  readonly inFlight: Map<string, number>;
  /** WebSocket upgrades the origin accepted. */
  readonly upgrades: Received[];
  /** Requests whose body broke off before its end (method, target, error). */
  readonly aborted: string[];
  /** The test read the last server-sent event: the origin writes the next one (`sse:N`). */
  ack(): void;
  close(): Promise<void>;
}

const KEEP_BODY_BYTES = 65_536;

/** Start the origin; `close()` stops it. */
export async function startRecordingOrigin(): Promise<RecordingOrigin> {
  const received: Received[] = [];
  const upgrades: Received[] = [];
  const inFlight = new Map<string, number>();
  const aborted: string[] = [];
  const acks: (() => void)[] = [];
  const server: Server = createServer((req, res) => {
    record(req, inFlight).then(
      (r) => {
        received.push(r);
        respond(req, res, r, acks);
      },
      (error: unknown) => {
        // A request whose client went away mid-body: kept for the test to see, never answered.
        aborted.push(`${req.method} ${req.url}: ${String(error)}`);
        res.destroy();
      },
    );
  });
  const sockets = new Set<import("node:stream").Duplex>();
  server.on("upgrade", (req: IncomingMessage, socket) => {
    // An upgraded socket is no longer the server's: closeAllConnections does not see it.
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    upgrades.push(headOf(req, Buffer.alloc(0), false));
    acceptWebSocket(req, socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    base: `http://127.0.0.1:${port}`,
    port,
    received,
    inFlight,
    upgrades,
    aborted,
    ack: () => acks.shift()?.(),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function headOf(req: IncomingMessage, body: Buffer, big: boolean, bytes = body.length, sha?: string): Received {
  const rawHeaders: [string, string][] = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) rawHeaders.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
  const headers: Record<string, string> = {};
  for (const [name, value] of rawHeaders) {
    const lower = name.toLowerCase();
    headers[lower] = lower in headers ? `${headers[lower]}, ${value}` : value;
  }
  return {
    method: req.method ?? "",
    target: req.url ?? "",
    rawHeaders,
    headers,
    bodyBytes: bytes,
    bodySha256: sha ?? createHash("sha256").update(body).digest("hex"),
    body: big ? null : body,
    chunked: /chunked/i.test(headers["transfer-encoding"] ?? ""),
  };
}

async function record(req: IncomingMessage, inFlight: Map<string, number>): Promise<Received> {
  const hash = createHash("sha256");
  const kept: Buffer[] = [];
  let bytes = 0;
  const id = req.headers["x-test-id"];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    hash.update(chunk);
    bytes += chunk.length;
    if (typeof id === "string") inFlight.set(id, bytes);
    if (bytes <= KEEP_BODY_BYTES) kept.push(chunk);
  }
  if (typeof id === "string") inFlight.delete(id);
  const big = bytes > KEEP_BODY_BYTES;
  return headOf(req, big ? Buffer.alloc(0) : Buffer.concat(kept), big, bytes, hash.digest("hex"));
}

/**
 * The answer `x-test-respond` asks for (default: 200 with a JSON summary of what arrived):
 * - `cookies`: 200 with three `Set-Cookie` lines;
 * - `redirect`: 302 to /elsewhere (never followed by a proxy);
 * - `not-modified`: 304 with an ETag and no body;
 * - `sse:N`: `text/event-stream`, N events, each written once the test acknowledged the one before (`ack`);
 * - `bytes:N`: N bytes of a repeating pattern, streamed in 64 KiB chunks (a large download);
 * - `status:N`: status N with a short body.
 */
function respond(req: IncomingMessage, res: ServerResponse, r: Received, acks: (() => void)[]): void {
  const ask = String(req.headers["x-test-respond"] ?? "");
  if (ask === "cookies") {
    res.writeHead(200, [
      ["Content-Type", "text/plain"],
      ["Set-Cookie", "a=1; Path=/"],
      ["Set-Cookie", "b=2; Path=/; HttpOnly"],
      ["Set-Cookie", "c=3, with comma; Path=/"],
    ]);
    res.end("cookies");
    return;
  }
  if (ask === "redirect") {
    res.writeHead(302, { Location: "/elsewhere", "Content-Type": "text/plain" });
    res.end("moved");
    return;
  }
  if (ask === "not-modified") {
    res.writeHead(304, { ETag: '"v1"' });
    res.end();
    return;
  }
  const sse = /^sse:(\d+)$/.exec(ask);
  if (sse !== null) {
    res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-store" });
    streamEvents(res, Number(sse[1]), acks);
    return;
  }
  const bytes = /^bytes:(\d+)$/.exec(ask);
  if (bytes !== null) {
    res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": bytes[1]! });
    streamBytes(res, Number(bytes[1]));
    return;
  }
  const status = /^status:(\d{3})$/.exec(ask);
  const code = status === null ? 200 : Number(status[1]);
  const summary = JSON.stringify({ method: r.method, target: r.target, bytes: r.bodyBytes, sha256: r.bodySha256 });
  res.writeHead(code, { "Content-Type": "application/json", "X-Origin": "recording" });
  res.end(req.method === "HEAD" ? undefined : summary);
}

/**
 * Write event 0, then each next event only once the test has read the one before (`ack`): if anything between held
 * the stream back until its end, the test would never read event 0 and the exchange would stall (the test's timeout),
 * so a passing run shows each event was delivered while the origin was still writing, without timing anything.
 */
function streamEvents(res: ServerResponse, count: number, acks: (() => void)[]): void {
  let i = 0;
  const next = () => {
    if (i === count) {
      res.end();
      return;
    }
    res.write(`id: ${i}\ndata: event ${i}\n\n`);
    i++;
    acks.push(next);
  };
  next();
}

function streamBytes(res: ServerResponse, total: number): void {
  const chunk = Buffer.alloc(65_536);
  for (let i = 0; i < chunk.length; i++) chunk[i] = i % 251;
  let sent = 0;
  const pump = () => {
    while (sent < total) {
      const n = Math.min(chunk.length, total - sent);
      sent += n;
      if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
        res.once("drain", pump);
        return;
      }
    }
    res.end();
  };
  pump();
}

/** The RFC 6455 handshake, then echo every text frame's payload back unmasked (enough for a small text message). */
function acceptWebSocket(req: IncomingMessage, socket: import("node:stream").Duplex): void {
  const key = String(req.headers["sec-websocket-key"] ?? "");
  const accept = createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
  );
  socket.on("data", (frame: Buffer) => {
    const opcode = frame[0]! & 0x0f;
    if (opcode === 0x8) {
      socket.end(Buffer.from([0x88, 0]));
      return;
    }
    const length = frame[1]! & 0x7f;
    if (opcode !== 0x1 || length > 125) return;
    const mask = frame.subarray(2, 6);
    const payload = Buffer.from(frame.subarray(6, 6 + length).map((b, i) => b ^ mask[i % 4]!));
    socket.write(Buffer.concat([Buffer.from([0x81, payload.length]), payload]));
  });
  socket.on("error", () => socket.destroy());
}
