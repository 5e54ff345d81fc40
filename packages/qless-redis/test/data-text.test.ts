import { ValidationError } from "@switchyard/core";
import { describe, expect, it } from "vitest";
import { qlessDataProblem } from "../src/data-text.js";
import { usePrivateQless } from "./helpers/private-redis.js";

/**
 * Enqueues send each job's data as a line of its own argument, and the script no longer decodes it:
 * the Backend refuses beforehand what qless's put would refuse (its cjson decode). These tests hold
 * that check to Redis's own cjson, and the enqueues to what Redis holds afterwards.
 */
const qless = usePrivateQless();
let seq = 0;
const queue = () => `dt-${process.pid}-${seq++}`;

/** Whether qless's put takes this data text: Redis's cjson decodes it to something other than false. */
async function putTakes(texts: string[]): Promise<boolean[]> {
  const verdicts = (await qless.redis.eval(
    "local out = {} for i, text in ipairs(ARGV) do local ok, v = pcall(cjson.decode, text) out[i] = (ok and v) and 1 or 0 end return out",
    0,
    ...texts,
  )) as number[];
  return verdicts.map((verdict) => verdict === 1);
}

/** A seeded generator (mulberry32), so a failure names a text that comes back. */
function random(seed: number) {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Strings made of the code units that make the check hard: surrogates, backslashes and the letters of `\ud800`. */
function trickyString(next: () => number): string {
  const units = ["\\", "u", "d", "8", "f", "0", '"', "a", "\n", "\u0000", "é"];
  let text = "";
  const length = Math.floor(next() * 8);
  for (let i = 0; i < length; i++) {
    const pick = next();
    text +=
      pick < 0.15
        ? String.fromCharCode(0xd800 + Math.floor(next() * 0x800))
        : pick < 0.2
          ? "😀"
          : (units[Math.floor(next() * units.length)] as string);
  }
  return text;
}

describe("qless-redis: the data text qless's put would refuse, found without decoding it in Redis", () => {
  it("agrees with Redis's cjson on every edge case and on 2,000 random values", async () => {
    const edges: unknown[] = [
      false,
      true,
      null,
      0,
      -0,
      "",
      "\ud800",
      "\udfff",
      "x\udbff",
      "😀",
      "\ud83d\ude00",
      "\\ud800",
      "\\\ud800",
      "\\\\ud800",
      { "\udc00": 1 },
      { "\\ud800": "\\udfff" },
      [false],
      { a: false },
      "\ud7ff\ue000",
      "line\nbreak",
    ];
    const next = random(20261128);
    const randomValues = Array.from({ length: 2000 }, () => {
      const text = trickyString(next);
      const shape = next();
      return shape < 0.4 ? text : shape < 0.7 ? { [text]: trickyString(next) } : [1, { k: text }];
    });
    const texts = [...edges, ...randomValues].map((value) => JSON.stringify(value));
    const takes = await putTakes(texts);
    const ours = texts.map((text) => qlessDataProblem(text) === null);
    const disagreements = texts.filter((_, i) => ours[i] !== takes[i]);
    expect(disagreements).toEqual([]);
    // Both verdicts occur among the random values, so the comparison can fail either way.
    expect(new Set(takes.slice(edges.length))).toEqual(new Set([true, false]));
  });

  it("refuses false and a lone surrogate before writing: nothing in Redis, and a bulk with one such job writes none", async () => {
    const q = queue();
    await expect(qless.backend.enqueue(q, { name: "f", data: false, id: `false-${q}` })).rejects.toThrow(
      'qless-redis: Put(): Arg "data" missing or not JSON: false',
    );
    await expect(qless.backend.enqueue(q, { name: "s", data: { text: "a\ud800" }, id: `lone-${q}` })).rejects.toThrow(ValidationError);
    await expect(
      qless.backend.enqueueBulk(q, [
        { name: "ok", data: { n: 1 }, id: `ok-${q}` },
        { name: "bad", data: { "\udc00": 1 }, id: `bad-${q}` },
      ]),
    ).rejects.toThrow(/lone UTF-16 surrogate/);
    for (const jid of [`false-${q}`, `lone-${q}`, `ok-${q}`, `bad-${q}`]) expect(await qless.redis.exists(`ql:j:${jid}`)).toBe(0);
    expect(await qless.redis.zcard(`ql:q:${q}-work`)).toBe(0);
  });

  it("a refused single enqueue fails only its caller when it shared a call with others", async () => {
    const q = queue();
    const outcomes = await Promise.allSettled([
      qless.backend.enqueue(q, { name: "a", data: 1 }),
      qless.backend.enqueue(q, { name: "b", data: "\udfff" }),
      qless.backend.enqueue(q, { name: "c", data: 3 }),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(await qless.redis.zcard(`ql:q:${q}-work`)).toBe(2);
  });

  it("a bulk of 9,000 jobs, past the arguments Lua unpacks, is one call and stores each job's data as JSON.stringify spells it", async () => {
    const q = queue();
    const data = Array.from({ length: 9000 }, (_, i) =>
      i % 3 === 0 ? { n: i, text: "line\nbreak \\ud800 😀" } : i % 3 === 1 ? [i, null, "é"] : `plain ${i}`,
    );
    await qless.redis.config("RESETSTAT");
    const results = await qless.backend.enqueueBulk(
      q,
      data.map((value) => ({ name: "bulk", data: value })),
    );
    const stats = await qless.redis.info("commandstats");
    expect([...stats.matchAll(/cmdstat_(?:fcall|evalsha|eval):calls=(\d+)/g)].map(([, calls]) => Number(calls))).toEqual([1]);
    expect(results).toHaveLength(9000);
    const stored = await Promise.all(results.map(({ job }) => qless.redis.hget(`ql:j:${job.id}`, "data")));
    expect(stored).toEqual(data.map((value) => JSON.stringify(value)));
    expect(results.map(({ job }) => job.data)).toEqual(data);
    expect((await qless.backend.get(q, results[8997]?.job.id as string))?.data).toEqual(data[8997]);
  });
});
