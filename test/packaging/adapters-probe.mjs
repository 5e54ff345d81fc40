// Runs inside a blank npm project where the packed tarballs were installed: imports each adapter as
// a user would and runs enqueue -> reserve -> complete on the real servers named in the environment.
// Prints one JSON report on stdout for test/packaging.test.ts to assert on.
import { createCloudqBackend } from "@switchyard/cloudq-mongo";
import { createGlideMqBackend } from "@switchyard/glidemq-valkey";
import { createQlessBackend } from "@switchyard/qless-redis";
import { createWorkerQueueBackend } from "@switchyard/workerqueue-sql";

const env = process.env;
const queue = `packaging-${process.pid}`;
const backends = {
  "workerqueue-sql:sqlite": () => createWorkerQueueBackend({ url: `sqlite:${env.PROBE_SQLITE_FILE}` }),
  "qless-redis": () => createQlessBackend({ url: env.PROBE_QLESS_URL }),
  "glidemq-valkey": () => createGlideMqBackend({ url: env.SWITCHYARD_REDIS_URL }),
  "cloudq-mongo": () => createCloudqBackend({ url: env.SWITCHYARD_MONGO_URL, database: env.PROBE_MONGO_DATABASE }),
};

async function cycle(create) {
  const backend = await create();
  await backend.ready();
  try {
    const { job } = await backend.enqueue(queue, { name: "Packaged", data: { n: 1 } });
    const [reserved] = await backend.reserve(queue, { worker: "packaging-probe" });
    const completed = await backend.complete(queue, reserved.id, { worker: "packaging-probe", result: "ok" });
    return { enqueued: job.id, reserved: reserved.id, data: reserved.data, state: completed.state };
  } finally {
    await backend.close();
  }
}

// A driver the user did not install is named in the error, so they know what to add.
async function missingDriver(url) {
  try {
    const backend = await createWorkerQueueBackend({ url });
    await backend.ready();
    await backend.close();
    return "no error";
  } catch (error) {
    return String(error?.message ?? error);
  }
}

const report = { cycles: {}, missingDriver: {} };
for (const [name, create] of Object.entries(backends)) report.cycles[name] = await cycle(create);
report.missingDriver.pg = await missingDriver(env.SWITCHYARD_POSTGRES_URL);
report.missingDriver.mysql2 = await missingDriver(env.SWITCHYARD_MYSQL_URL);
process.stdout.write(`${JSON.stringify(report)}\n`);
