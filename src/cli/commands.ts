/** Commands beyond the core three (simulate, validate, compile). */
import { runCompare } from "./compare.ts";
import { runGen } from "./gen.ts";
import type { Io } from "./main.ts";

export const EXTRA_COMMANDS: Record<string, (args: string[], io: Io) => Promise<number>> = {
  compare: runCompare,
  gen: runGen,
};
