import { cloudqAdapter } from "@switchyard/cloudq-mongo";
import type { AdapterDescriptor } from "@switchyard/core";
import { glideMqAdapter } from "@switchyard/glidemq-valkey";
import { qlessAdapter } from "@switchyard/qless-redis";
import { workerQueueAdapter } from "@switchyard/workerqueue-sql";

/**
 * The adapters this build offers: the registry and the configuration schema are derived from this
 * list, and it is the only place in the gateway that names an adapter package. A new backend is
 * one more descriptor here.
 */
export const ADAPTERS: readonly AdapterDescriptor[] = [workerQueueAdapter, qlessAdapter, glideMqAdapter, cloudqAdapter];
