/**
 * Progress of long work on standard error, when standard error is a terminal: lines read, lines per second and,
 * when the input's size is known, the time left. One line, rewritten in place at most twice a second, cleared at the
 * end. Nothing at all when standard error is not a terminal (a pipe, a file, a test).
 */
import { systemClock } from "../isolate/time.ts";

export class Progress {
  private readonly enabled: boolean;
  private readonly startMs: number;
  private lastDrawMs = 0;
  private drawn = false;

  constructor(
    private readonly stderr: NodeJS.WritableStream,
    private readonly label: string,
    /** The input's size in bytes, when known. */
    private readonly totalBytes: number | null,
    private readonly clock: () => number = systemClock,
  ) {
    this.enabled = (stderr as { isTTY?: boolean }).isTTY === true;
    this.startMs = this.enabled ? this.clock() : 0;
  }

  /** `lines` read so far, `bytes` of the input consumed. Cheap when nothing is drawn. */
  update(lines: number, bytes: number): void {
    if (!this.enabled) return;
    const now = this.clock();
    if (now - this.lastDrawMs < 500) return;
    this.lastDrawMs = now;
    this.stderr.write(`\r\x1b[2K${progressText(this.label, lines, bytes, this.totalBytes, now - this.startMs)}`);
    this.drawn = true;
  }

  /** Clear the line (the report follows). */
  done(): void {
    if (this.drawn) this.stderr.write("\r\x1b[2K");
  }
}

/** `sluice compare: 1,200,000 lines, 410,000 lines/s, 45% read, about 4 s left`. */
export function progressText(
  label: string,
  lines: number,
  bytes: number,
  totalBytes: number | null,
  elapsedMs: number,
): string {
  const rate = elapsedMs > 0 ? Math.round((lines * 1000) / elapsedMs) : 0;
  const parts = [`${label}: ${lines.toLocaleString("en-US")} lines`, `${rate.toLocaleString("en-US")} lines/s`];
  if (totalBytes !== null && totalBytes > 0 && bytes > 0) {
    const share = Math.min(1, bytes / totalBytes);
    const leftS = share > 0 ? Math.ceil(((elapsedMs / share) * (1 - share)) / 1000) : 0;
    parts.push(`${Math.floor(share * 100)}% read`, `about ${leftS} s left`);
  }
  return parts.join(", ");
}
