import { count } from "../format.js";
import { Link, queueHref } from "../router.js";
import { type Counts, type JobState, STATES } from "../types.js";

/**
 * A queue's jobs by state as tiles; with a queue, each tile links to that state's list. Widths are
 * fixed and digits tabular, so numbers changing live never move anything around.
 */
export function CountTiles({ counts, queue, current }: { counts: Counts | null; queue?: string; current?: JobState }) {
  return (
    <ul class="tiles" aria-label="Jobs by state">
      {STATES.map((state) => {
        const value = counts ? count(counts[state]) : "…";
        const inner = (
          <>
            <span class="tile-label">{state}</span>
            <span class="tile-value num" data-state={state} data-testid={`count-${state}`}>
              {value}
            </span>
          </>
        );
        return (
          <li key={state} class={`tile state-${state}${state === current ? " current" : ""}`}>
            {queue ? (
              <Link href={queueHref(queue, { state })} aria-current={state === current ? "page" : undefined}>
                {inner}
              </Link>
            ) : (
              <div>{inner}</div>
            )}
          </li>
        );
      })}
    </ul>
  );
}
