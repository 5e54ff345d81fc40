import { MongoClient } from "mongodb";
const c = new MongoClient(process.env.SWITCHYARD_MONGO_URL);
await c.connect();
const dbn = "cloudq_p_" + Math.random().toString(36).slice(2, 10);
const col = c.db(dbn).collection("cloudq.jobs");
await col.insertMany(
  Array.from({ length: 650 }, (_, i) => ({
    klass: "x",
    args: [{ i }],
    queue: "q",
    queue_state: "queued",
    inserted_at: new Date(),
    switchyard: { attempts: 1, lease: { worker: "w", expiresAt: 1 } },
  })),
);
const ids = (await col.find({}, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
const now = Date.now();
const or = {
  $or: [
    { queue_state: "queued", "switchyard.runAt": null },
    { queue_state: "queued", "switchyard.runAt": { $lte: now } },
    { queue_state: "reserved", "switchyard.lease.expiresAt": { $lt: now } },
  ],
};
const time = async (name, f) => {
  const t = Date.now();
  for (let i = 0; i < 10; i++) await f(i);
  console.log(name, (Date.now() - t) / 10);
};
await time("id last", (i) => col.findOne({ queue: "q", ...or, _id: ids[640 - i] }));
await time("id first", (i) => col.findOne({ _id: ids[630 - i], queue: "q", ...or }));
await time("id only", (i) => col.findOne({ _id: ids[620 - i] }));
await time("find all", (i) => col.find({ queue: "q" }).toArray());
await time("find all proj", (i) => col.find({ queue: "q" }, { projection: { _id: 1 } }).toArray());
await time("find sorted limit", (i) =>
  col
    .find({ queue: "q", ...or }, { projection: { _id: 1 } })
    .sort({ queue_state: -1, "switchyard.boost": -1, "switchyard.demote": 1, inserted_at: 1, _id: 1 })
    .limit(60)
    .toArray(),
);
await time("find sorted _id limit", (i) =>
  col
    .find({ queue: "q", ...or }, { projection: { _id: 1 } })
    .sort({ _id: 1 })
    .limit(60)
    .toArray(),
);
await time("count", (i) => col.countDocuments({ queue: "q" }));
await c.db(dbn).dropDatabase();
await c.close();
