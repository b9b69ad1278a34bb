// What every functions/<name>/main.ts exports as build(): the function made
// from its environment, not yet serving. The two entries share it, so each
// function is put together in one place: main() serves it as a process
// (container, `npm run serve`), lambda.ts hands it to ../lambda-adapter.ts.

import type { Controller } from "../shared/http/controller-function.ts";
import type { FunctionApp } from "../shared/http/function-app.ts";
import { serveFunction } from "../shared/http/serve.ts";
import type { PersistentVolume, StorageClass } from "../shared/kube/types.ts";
import type { LazyWatchedStore } from "../shared/kube/watched-store.ts";
import type { Logger } from "../shared/log.ts";

export interface BuiltFunction {
  /** "binder": the name it is served and logged under. */
  name: string;
  app: FunctionApp;
  logger: Logger;
  /** A controller function's controller, for one process that hosts several (functions/controllers). */
  controller?: Controller;
  /** What its /readyz asks beyond being up (a CSI function: the driver answers Probe). */
  ready?: () => Promise<boolean>;
  /** Releases what build() opened (API and CSI clients); the server runs it after draining. */
  close(): Promise<void>;
}

/**
 * Watched copies a process hosting several controller functions keeps once
 * for all of them (functions/controllers/shared-copies.ts): each function
 * takes these instead of starting its own, where its *_CACHE setting wants
 * one, and leaves stopping them to the host.
 */
export interface SharedCopies {
  /** Every PV, indexed as the binder looks volumes up by claim (the attacher reads it by name). */
  persistentVolumes: LazyWatchedStore<PersistentVolume>;
  storageClasses: LazyWatchedStore<StorageClass>;
}

/** What build() may be handed beyond the environment. */
export interface BuildContext {
  copies?: SharedCopies;
}

/** Serves a built function until SIGTERM/SIGINT, closing its clients after the server. */
export async function serveBuilt(built: BuiltFunction): Promise<void> {
  await serveFunction(built.app, { name: built.name, logger: built.logger, onClose: [() => built.close()] });
}

export interface OpenedParts {
  /** Watched copies (caches) that read through `kube`; absent ones are skipped. */
  copies?: readonly ({ stop(): Promise<void> } | undefined)[];
  kube: { close(): Promise<void> };
  csi?: { close(): void };
}

/** BuiltFunction.close for what build() opened: the watched copies first, since they read through the API client, then the clients. */
export function closeParts(parts: OpenedParts): () => Promise<void> {
  return async () => {
    await Promise.all((parts.copies ?? []).map((copy) => copy?.stop()));
    await parts.kube.close();
    parts.csi?.close();
  };
}
