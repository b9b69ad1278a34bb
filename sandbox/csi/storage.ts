// Backing storage, hostpath style: a mount volume is a directory, a block
// volume a sparse file of its size, and a snapshot a copy of either.
import { execFile } from "node:child_process";
import { cp, mkdir, open, readdir, rm, truncate } from "node:fs/promises";
import { promisify } from "node:util";
import type { VolumeKind } from "./state.ts";

const chunkBytes = 1024 * 1024;
const zeros = Buffer.alloc(chunkBytes);

/** Makes an empty volume: a directory, or a sparse file of sizeBytes. */
export async function createBacking(path: string, kind: VolumeKind, sizeBytes: number): Promise<void> {
  if (kind === "mount") {
    await mkdir(path);
    return;
  }
  const file = await open(path, "wx", 0o600);
  try {
    await file.truncate(sizeBytes);
  } finally {
    await file.close();
  }
}

/**
 * Copies a volume or snapshot to a new path (clone, snapshot, restore). A
 * block copy is resized to sizeBytes, which is at least the source's size.
 */
export async function copyBacking(
  from: string,
  to: string,
  kind: VolumeKind,
  sizeBytes: number,
): Promise<void> {
  if (kind === "mount") {
    await cp(from, to, { recursive: true, errorOnExist: true, force: false, preserveTimestamps: true });
    return;
  }
  try {
    // GNU cp finds the holes with SEEK_DATA and copies only data: instant
    // for a mostly empty volume. fs.copyFile writes every zero out.
    await promisify(execFile)("cp", ["--sparse=always", "--", from, to]);
  } catch {
    // No GNU cp (macOS, BusyBox): read everything, skip all-zero chunks.
    await rm(to, { force: true });
    await copySparse(from, to);
  }
  await truncate(to, sizeBytes);
}

/** Copies a file leaving all-zero chunks as holes; slow (reads the holes) but portable. */
export async function copySparse(from: string, to: string): Promise<void> {
  const src = await open(from, "r");
  try {
    const dst = await open(to, "wx", 0o600);
    try {
      const size = (await src.stat()).size;
      const buf = Buffer.alloc(chunkBytes);
      for (let pos = 0; pos < size; pos += chunkBytes) {
        const { bytesRead } = await src.read(buf, 0, Math.min(chunkBytes, size - pos), pos);
        if (bytesRead === 0) break;
        const chunk = buf.subarray(0, bytesRead);
        if (!chunk.equals(zeros.subarray(0, bytesRead))) await dst.write(chunk, 0, bytesRead, pos);
      }
      await dst.truncate(size);
    } finally {
      await dst.close();
    }
  } finally {
    await src.close();
  }
}

export async function resizeBacking(path: string, kind: VolumeKind, sizeBytes: number): Promise<void> {
  // A directory has no size of its own; the capacity lives in the state.
  if (kind === "block") await truncate(path, sizeBytes);
}

export async function removeBacking(path: string): Promise<void> {
  await rm(path, { recursive: true, force: true });
}

/** Names in a directory, created if missing. */
export async function entriesOf(dir: string): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  return readdir(dir);
}
