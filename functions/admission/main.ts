// Entry of the admission function: `FUNCTION=admission npm run serve`, or the
// container command. Configuration (README): KUBECONFIG (or the in-cluster
// service account), PORT, LOG_LEVEL, MAX_BODY_BYTES, PROVISIONER_DRIVERS,
// STORAGE_CLASS_CACHE, ADMISSION_LOOKUP_TIMEOUT_MS, ADMISSION_CACHE_TTL_MS,
// ADMISSION_CACHE_MAX_ENTRIES, ADMISSION_FAILURE_POLICY_MUTATE_PVC,
// ADMISSION_FAILURE_POLICY_VALIDATE_PVC, ADMISSION_FAILURE_POLICY_VALIDATE_VA
// (shared/admission/config.ts).
//
// Building and serving are apart on purpose: createAdmission() (or build(),
// the shape every function's main.ts exports) makes the app, main() and
// lambda.ts serve it. kube-apiserver only calls webhooks over HTTPS:
// serveFunction serves HTTPS when TLS_CERT_FILE/TLS_KEY_FILE or
// TLS_SECRET_NAME/TLS_SECRET_NAMESPACE are set (shared/tls), plain HTTP
// otherwise (tests, a TLS-terminating proxy or Knative route).
import { createClusterLookups } from "../../shared/admission/cluster-lookups.ts";
import { type AdmissionConfig, admissionConfigFromEnv } from "../../shared/admission/config.ts";
import { createAdmissionHooks } from "../../shared/admission/hooks.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { storageClassCopyFromEnv } from "../../shared/kube/storage-class-copy.ts";
import { createLogger } from "../../shared/log.ts";
import { processMetrics } from "../../shared/metrics.ts";
import { type BuiltFunction, serveBuilt } from "../built-function.ts";
import { admissionBodyLimit, createAdmissionApp } from "./app.ts";

/** close() stops the StorageClass copy and closes the API client. */
export interface Admission extends BuiltFunction {
  config: AdmissionConfig;
}

/** The admission app from the environment, not yet serving. */
export function createAdmission(env: NodeJS.ProcessEnv = process.env): Admission {
  const logger = createLogger({ name: "admission" });
  const config = admissionConfigFromEnv(env);
  // No API request may outlive the lookup deadline: a stuck one would hold
  // every review that waits on the same cache key.
  const kubeConfig = loadKubeConfig(env);
  const kube = new KubeJsonClient(kubeConfig, { requestTimeoutMs: config.lookupTimeoutMs });
  // Started with the process, not by the first review: a burst of claims then finds it synced
  // (a cold list behind the burst missed the lookup deadline, and its claims went unmutated).
  const classCopy = storageClassCopyFromEnv(env, { kubeConfig, json: kube, log: logger });
  classCopy?.get();
  const metrics = processMetrics();
  const lookups = createClusterLookups(kube, {
    timeoutMs: config.lookupTimeoutMs,
    cacheTtlMs: config.cacheTtlMs,
    cacheMaxEntries: config.cacheMaxEntries,
    ...(classCopy ? { classCopy: () => classCopy.get() } : {}),
    metrics,
  });
  const app = createAdmissionApp({
    hooks: createAdmissionHooks({ lookups, config }),
    logger,
    metrics,
    maxBodyBytes: admissionBodyLimit(env),
  });
  const close = async () => {
    await classCopy?.stop();
    await kube.close();
  };
  return { name: "admission", app, config, logger, close };
}

/** createAdmission as every function's build(): nothing in it needs to wait. */
export async function build(env = process.env): Promise<BuiltFunction> {
  return createAdmission(env);
}

export async function main(): Promise<void> {
  await serveBuilt(createAdmission());
}
