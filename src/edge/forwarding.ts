/**
 * The header fields an admitted request carries on to its origin (docs/production.md, "What the origin receives"):
 * every field the client sent, except
 * - the hop-by-hop fields of RFC 9110 section 7.6.1: `Connection` and every field it names, `Proxy-Connection`,
 *   `Keep-Alive`, `TE`, `Transfer-Encoding`, and `Upgrade` unless it asks for a WebSocket (the runtime's fetch passes
 *   a WebSocket upgrade through, nothing else);
 * - `Expect`: the runtime's fetch cannot take an origin's `100 Continue` (it answers 502), and its own server already
 *   reads the client's body when the Worker forwards it;
 * - any field carrying the admin token (admin.ts `withoutAdminToken`).
 * The runtime's fetch itself replaces `Host` (the origin's), `Accept-Encoding` and `Content-Length` /
 * `Transfer-Encoding` (framing), drops `CF-Connecting-IP` and adds `CF-Worker`: those are not Sluice's to choose.
 */
import { logEvent } from "../isolate/metrics.ts";
import { withoutAdminToken } from "./admin/admin_guard.ts";

/** The fields RFC 9110 section 7.6.1 names as hop-by-hop, lower-case, with `Expect` (see above). */
export const HOP_BY_HOP = ["connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade"];

/**
 * The request to send on: `request` itself when no field has to go, else a request with the fields above removed that
 * takes over `request`'s body (a stream, never read or copied here; `request` must not be used again).
 */
export function outgoingRequest(request: Request, adminToken: string | null): Request {
  const headers = new Headers(request.headers);
  const removed = withoutHopByHop(headers);
  const tokens = adminToken === null ? 0 : withoutAdminToken(headers, adminToken);
  if (tokens > 0) logEvent("warn", { event: "admin_token_stripped" });
  if (removed === 0 && tokens === 0) return request;
  return new Request(request, { headers });
}

/** Remove the hop-by-hop fields and `Expect` from `headers`; the number removed. */
export function withoutHopByHop(headers: Headers): number {
  const names = new Set<string>(["expect", ...HOP_BY_HOP]);
  const connection = headers.get("connection");
  const websocket = /^\s*websocket\s*$/i.test(headers.get("upgrade") ?? "");
  for (const option of (connection ?? "").split(",")) {
    const name = option.trim().toLowerCase();
    if (name !== "") names.add(name);
  }
  if (websocket) {
    names.delete("upgrade");
    names.delete("connection");
  }
  let removed = 0;
  for (const name of names) {
    if (!headers.has(name)) continue;
    headers.delete(name);
    removed++;
  }
  return removed;
}
