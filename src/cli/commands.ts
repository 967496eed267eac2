/** Commands beyond the core three (simulate, validate, compile). */
import type { Io } from "./main.ts";

export const EXTRA_COMMANDS: Record<string, (args: string[], io: Io) => Promise<number>> = {};
