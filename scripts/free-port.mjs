// A free TCP port on 127.0.0.1 for a server another process will start (wrangler dev, its inspector, nginx).
//
// Not a port the kernel hands out for `listen(0)`: those come from the ephemeral range, which is also where every
// outgoing connection's local port comes from, so between the probe and the other process's bind a client socket
// of the same machine may take it (seen: the e2e suite under load, 2026-12-07, workerd "Address already in use" on a
// probed inspector port). A port below that range is never given to a client socket; one another server holds is
// skipped by the probe.
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/** The first port of the kernel's ephemeral range (Linux), else IANA's 49152. */
function ephemeralStart() {
  try {
    const [low] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (Number.isSafeInteger(low) && low > 2048) return low;
  } catch {
    // not Linux
  }
  return 49152;
}

/** Whether 127.0.0.1:`port` can be listened on now. */
function canListen(port) {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * A port between 10000 and the ephemeral range's start that nothing listens on, chosen at random (tests started in
 * parallel rarely pick the same one); `avoid`: ports already chosen for the same server.
 * @param {readonly number[]} [avoid]
 * @returns {Promise<number>}
 */
export async function freePort(avoid = []) {
  const low = 10000;
  const high = Math.max(low + 1000, ephemeralStart());
  for (let tries = 0; tries < 200; tries++) {
    const port = low + Math.floor(Math.random() * (high - low));
    if (!avoid.includes(port) && (await canListen(port))) return port;
  }
  throw new Error(`no free port on 127.0.0.1 between ${low} and ${high} after 200 tries`);
}
