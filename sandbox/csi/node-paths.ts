// The directories (and, for block volumes, files) a node plugin makes at the
// paths the kubelet gives it. Only what the plugin made is removed: an empty
// directory or a plain file, never a tree.
import { mkdir, rm, rmdir, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { VolumeKind } from "./state.ts";

export async function makeNodePath(path: string, kind: VolumeKind): Promise<void> {
  if (kind === "mount") {
    await mkdir(path, { recursive: true });
    return;
  }
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, "", { flag: "a" });
}

export async function removeNodePath(path: string, kind: VolumeKind): Promise<void> {
  try {
    if (kind === "mount") await rmdir(path);
    else await rm(path);
  } catch (err) {
    // Gone already, or something the caller put there since: the record is what counts.
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "ENOENT" && code !== "ENOTEMPTY" && code !== "ENOTDIR" && code !== "EISDIR") throw err;
  }
}
