import { cloudqAdapter } from "@switchyard/cloudq-mongo/descriptor";
import type { AdapterDescriptor } from "@switchyard/core";
import { glideMqAdapter } from "@switchyard/glidemq-valkey/descriptor";
import { qlessAdapter } from "@switchyard/qless-redis/descriptor";
import { workerQueueAdapter } from "@switchyard/workerqueue-sql/descriptor";

/**
 * The adapters this build offers: the registry and the configuration schema are derived from this
 * list, and it is the only place in the gateway that names an adapter package. A new backend is
 * one more descriptor here. Each comes from its package's `descriptor` entry, which loads the
 * backend code and its driver only when a backend of that type is opened.
 */
export const ADAPTERS: readonly AdapterDescriptor[] = [workerQueueAdapter, qlessAdapter, glideMqAdapter, cloudqAdapter];
