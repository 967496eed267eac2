/** A free port on 127.0.0.1 outside the ephemeral range, not one of `avoid` (free-port.mjs says why). */
export function freePort(avoid?: readonly number[]): Promise<number>;
