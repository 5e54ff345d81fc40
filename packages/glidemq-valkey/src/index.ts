export { queueKeys, validateQueueName, validateJobId, PRIORITY_SHIFT, CONSUMER_GROUP, DEFAULT_PREFIX, type QueueKeys } from "./keys.js";
export { loadScripts, runScript, type RedisClient } from "./scripts.js";
export { encodeData, decodeText, parseStored, MAX_JOB_DATA_SIZE } from "./codec.js";
export { checkOptions, type GlideJobOptions } from "./options.js";
export { GlideProducer, type GlideProducerOptions, type NewJob, type AddOutcome } from "./producer.js";
export { GlideConsumer, type GlideConsumerOptions, type ActivatedJob } from "./consumer.js";
export { jobCounts, setPaused, isPaused, type GlideJobCounts } from "./queue-admin.js";
