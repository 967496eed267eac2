/**
 * A temporary file for the chunks `compare`'s peak windows hold beyond memory (src/replay/admission_queue.ts): fixed
 * slots of one chunk each, reused once read back, so the file is as large as the most admissions any window held at
 * once (20 bytes each). Created on the first chunk, removed by `close` (and on exit, should the command fail first).
 */
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CHUNK_BYTES, type ChunkSpill } from "../replay/admission_queue.ts";

export class FileSpill implements ChunkSpill {
  private file: { readonly dir: string; readonly fd: number } | null = null;
  private readonly free: number[] = [];
  private slots = 0;
  private readonly onExit = () => this.close();

  write(bytes: Uint8Array): number {
    const { fd } = this.open();
    const slot = this.free.pop() ?? this.slots++;
    writeSync(fd, bytes, 0, bytes.length, slot * CHUNK_BYTES);
    return slot;
  }

  read(handle: number, into: Uint8Array): void {
    const { fd } = this.open();
    let done = 0;
    while (done < into.length) {
      const n = readSync(fd, into, done, into.length - done, handle * CHUNK_BYTES + done);
      if (n === 0) throw new Error(`spill file ended inside chunk ${handle}`);
      done += n;
    }
    this.free.push(handle);
  }

  /** Bytes the file takes (its slots, used or free). */
  get bytes(): number {
    return this.slots * CHUNK_BYTES;
  }

  close(): void {
    if (this.file === null) return;
    closeSync(this.file.fd);
    rmSync(this.file.dir, { recursive: true, force: true });
    this.file = null;
    process.off("exit", this.onExit);
  }

  private open(): { readonly dir: string; readonly fd: number } {
    if (this.file === null) {
      const dir = mkdtempSync(join(tmpdir(), "sluice-spill-"));
      this.file = { dir, fd: openSync(join(dir, "admissions"), "w+") };
      process.on("exit", this.onExit);
    }
    return this.file;
  }
}
