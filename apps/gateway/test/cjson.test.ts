import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { serviceUrl } from "../../../test/support/services.js";
import { BeyondJsonError, cjsonDecode } from "../src/doors/cjson.js";

/**
 * The qless doors read JSON arguments as qless.lua does, through the cjson inside Redis: each text is
 * decoded by the real Redis (`EVAL cjson.decode`) and by cjsonDecode, and both must refuse it with the
 * same message or take it to the same value.
 */
const redis = new Redis(serviceUrl("redis"), { maxRetriesPerRequest: 1 });
afterAll(() => redis.disconnect());

/** Redis answers the decoded value re-encoded, or `nonfinite` for the numbers JSON cannot carry. */
const DECODE = `local value = cjson.decode(ARGV[1])
if type(value) == 'number' and (value ~= value or value == math.huge or value == -math.huge) then return 'nonfinite' end
return cjson.encode(value)`;

type Outcome = { ok: unknown } | { error: string } | { nonfinite: true };

async function redisDecode(text: string): Promise<Outcome> {
  try {
    const reply = String(await redis.eval(DECODE, 0, text));
    return reply === "nonfinite" ? { nonfinite: true } : { ok: JSON.parse(reply) };
  } catch (error) {
    // Redis wraps the script's error: `ERR user_script:2: <message> script: <sha>, on @user_script:2.`
    return {
      error: (error as Error).message.replace(/^ERR user_script:\d+: /, "").replace(/ script: [0-9a-f]+, on @user_script:\d+\.$/, ""),
    };
  }
}

function ourDecode(text: string): Outcome {
  try {
    return { ok: cjsonDecode(text) };
  } catch (error) {
    return error instanceof BeyondJsonError ? { nonfinite: true } : { error: (error as Error).message };
  }
}

/** cjson writes an empty array as `{}` and numbers to 14 digits: compare values in that form. */
function asCjsonWrites(value: unknown): unknown {
  if (Array.isArray(value)) return value.length === 0 ? {} : value.map(asCjsonWrites);
  if (typeof value === "number") return Number(value.toPrecision(14));
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, asCjsonWrites(item)]));
  return value;
}

async function expectSameAsRedis(text: string): Promise<void> {
  const theirs = await redisDecode(text);
  const ours = ourDecode(text);
  const shown = (outcome: Outcome) => ("ok" in outcome ? { ok: asCjsonWrites(outcome.ok) } : outcome);
  expect(shown(ours), JSON.stringify(text)).toEqual(shown(theirs));
}

/** Texts that reach each of cjson's messages and each of its departures from strict JSON. */
const NAMED = [
  "{bad",
  "",
  "[1,]",
  "{,}",
  '{"a":1,}',
  '{"a" 1}',
  '{"a":1 "b":2}',
  "[1 2]",
  "1 2",
  '{"a":1}x',
  "nul",
  "tru",
  ".5",
  "-",
  "+",
  "+x",
  "1e",
  '"ab',
  '"a\\q"',
  '"\\u12"',
  '"\\u12g4"',
  '"\\ud800"',
  '"\\udc00"',
  '"\\ud83d\\ude00"',
  '"é\\x"',
  '{"é":1 x}',
  "0x10",
  "-0x10",
  "[0x1p3]",
  "+1",
  "01",
  "1.e3",
  "1e400",
  "inf",
  "-Infinity",
  "NaN",
  '"a\tb"',
  "{}\u0000zz",
  "a\u0000",
  "\t[ ]\n",
  '{"a":{"b":[1,{"c":}]}}',
  '{"__proto__":{"x":1}}',
  `${"[".repeat(1000)}${"]".repeat(1000)}`,
  `${"[".repeat(1001)}${"]".repeat(1001)}`,
  '{"a":'.repeat(1001),
];

describe("JSON arguments read as Redis's cjson reads them", () => {
  it("refuses and takes each named text as the real cjson does, message for message", async () => {
    for (const text of NAMED) await expectSameAsRedis(text);
  });

  it("agrees with the real cjson on 3,000 random texts of JSON's characters", async () => {
    // A fixed seed (a linear congruential generator), so a failure can be replayed.
    let state = 20261128;
    const random = () => {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      return state / 2 ** 32;
    };
    const alphabet = '{}[]":,0123456789-+.eExtrufalsnINp\\ \tué中';
    for (let i = 0; i < 3000; i++) {
      let text = "";
      for (let n = 1 + Math.floor(random() * 20); n > 0; n--) text += alphabet[Math.floor(random() * alphabet.length)];
      await expectSameAsRedis(text);
    }
  });

  it("reads a key named __proto__ as a plain field", () => {
    const decoded = cjsonDecode('{"__proto__":{"x":1}, "a": 0x1}') as Record<string, unknown>;
    expect(Object.keys(decoded)).toEqual(["__proto__", "a"]);
    expect(decoded.a).toBe(1);
    expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype);
  });
});
