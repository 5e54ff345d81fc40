import { z } from "zod";
import { JobStateSchema, MAX_DELAY_MS } from "./job.js";
import { storableText } from "./text.js";

/** The most jobs one reserve, list or export page may hold. */
export const MAX_PAGE_SIZE = 1000;

export const QueueNameSchema = storableText("a queue name");
export const JobIdSchema = storableText("a job id");
export const WorkerNameSchema = storableText("a worker name");
export const UniqueKeySchema = storableText("a unique key");

export const PageSizeSchema = z.number().int().min(1).max(MAX_PAGE_SIZE);
export const LeaseMsSchema = z.number().int().positive().max(MAX_DELAY_MS);

export const ReserveOptionsSchema = z.object({
  worker: WorkerNameSchema,
  count: PageSizeSchema.optional(),
  leaseMs: LeaseMsSchema.optional(),
});

export const ListOptionsSchema = z.object({
  state: JobStateSchema,
  limit: PageSizeSchema.optional(),
  cursor: z.string().optional(),
});

export const ExportOptionsSchema = z.object({
  limit: PageSizeSchema.optional(),
  cursor: z.string().optional(),
});
