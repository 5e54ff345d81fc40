import { describe, expect, it } from "vitest";
import { groupCommit } from "../src/index.js";

/** A send that records its batches and answers each item doubled, after the test lets it go. */
function recordingSend(refuse?: (item: number) => boolean) {
  const batches: number[][] = [];
  let inFlight = 0;
  let mostInFlight = 0;
  const send = async (_key: string, items: number[]) => {
    batches.push(items);
    inFlight++;
    mostInFlight = Math.max(mostInFlight, inFlight);
    await new Promise((resolve) => setTimeout(resolve, 5));
    inFlight--;
    if (refuse && items.some(refuse)) throw new Error(`refused ${items.filter(refuse).join(",")}`);
    return items.map((item) => item * 2);
  };
  return { send, batches, mostInFlight: () => mostInFlight };
}

describe("groupCommit", () => {
  it("sends calls made together in one batch, and those that come while it is in flight in the next, in order", async () => {
    const { send, batches } = recordingSend();
    const call = groupCommit(send);
    const first = [1, 2, 3].map((n) => call("q", n));
    await new Promise((resolve) => setTimeout(resolve, 1));
    const second = [4, 5].map((n) => call("q", n));
    expect(await Promise.all([...first, ...second])).toEqual([2, 4, 6, 8, 10]);
    expect(batches).toEqual([
      [1, 2, 3],
      [4, 5],
    ]);
  });

  it("keeps keys apart, takes at most what `take` says, and keeps at most maxInFlight sends of a key in flight", async () => {
    const { send, batches, mostInFlight } = recordingSend();
    const call = groupCommit(send, { take: (waiting) => Math.min(2, waiting.length), maxInFlight: 2 });
    const answers = await Promise.all([call("a", 1), call("b", 10), call("a", 2), call("a", 3), call("a", 4), call("a", 5)]);
    expect(answers).toEqual([2, 20, 4, 6, 8, 10]);
    expect(batches.filter((batch) => batch[0] !== 10)).toEqual([[1, 2], [3, 4], [5]]);
    expect(batches).toContainEqual([10]);
    expect(mostInFlight()).toBe(3); // two of key a, one of key b
  });

  it("balanced: callers that call again once answered split evenly over the sends in flight, instead of one large send and a small one", async () => {
    const sizes = (balanced: boolean) => {
      const { send, batches } = recordingSend();
      const call = groupCommit(send, { maxInFlight: 2, balanced });
      // 12 callers chaining 10 calls each; one caller starts alone, so the first sends are 1 and 11.
      const chain = async (first: number) => {
        for (let i = 0; i < 10; i++) await call("q", first * 100 + i);
      };
      const started = chain(0);
      return new Promise<number[][]>((resolve) =>
        setTimeout(async () => {
          await Promise.all([started, ...Array.from({ length: 11 }, (_, n) => chain(n + 1))]);
          resolve(batches.map((batch) => [batch.length]));
        }, 1),
      );
    };
    const drifting = (await sizes(false)).flat();
    const even = (await sizes(true)).flat();
    // Unbalanced, the split the start made stays: sends of 1 and 11 in turn.
    expect(drifting.slice(0, 6)).toEqual([1, 11, 1, 11, 1, 11]);
    // Balanced, each send takes its half of the 12 outstanding calls from the second on.
    expect(even.slice(2, 8)).toEqual([6, 6, 6, 6, 6, 6]);
    expect(even.reduce((sum, size) => sum + size, 0)).toBe(120);
  });

  it("a refused batch: each item is sent alone when retryAlone allows it, so only the refused one fails", async () => {
    const { send, batches } = recordingSend((item) => item === 2);
    const call = groupCommit(send, { retryAlone: (error) => /refused/.test(String(error)) });
    const outcomes = await Promise.allSettled([1, 2, 3].map((n) => call("q", n)));
    expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value : "rejected"))).toEqual([2, "rejected", 6]);
    expect(batches).toEqual([[1, 2, 3], [1], [2], [3]]);
  });

  it("without retryAlone every caller of a failed batch gets its error", async () => {
    const { send } = recordingSend((item) => item === 2);
    const call = groupCommit(send);
    const outcomes = await Promise.allSettled([1, 2, 3].map((n) => call("q", n)));
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected", "rejected"]);
  });

  it("a send that answers the wrong number of outcomes fails its callers rather than answering them wrongly", async () => {
    const call = groupCommit(async (_key: string, items: number[]) => items.slice(1));
    const outcomes = await Promise.allSettled([1, 2].map((n) => call("q", n)));
    expect(outcomes.map((o) => (o.status === "rejected" ? String(o.reason) : o.value))).toEqual([
      "Error: group commit: 1 outcomes for 2 items",
      "Error: group commit: 1 outcomes for 2 items",
    ]);
  });
});
