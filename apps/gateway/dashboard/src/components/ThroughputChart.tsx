import { count } from "../format.js";
import type { Minute } from "../types.js";

const WIDTH = 600;
const HEIGHT = 120;

/**
 * Completed (up) and failed (down) jobs per minute over the last hour, as inline SVG bars. The text
 * summary beside it says the same for those who do not see the chart.
 */
export function ThroughputChart({ minutes }: { minutes: Minute[] | null }) {
  if (!minutes) return <div class="chart chart-empty">Loading throughput…</div>;
  const completed = minutes.reduce((sum, m) => sum + m.completed, 0);
  const failed = minutes.reduce((sum, m) => sum + m.failed, 0);
  const peak = Math.max(1, ...minutes.map((m) => Math.max(m.completed, m.failed)));
  const half = HEIGHT / 2;
  const slot = WIDTH / Math.max(1, minutes.length);
  const bar = Math.max(1, slot - 2);
  const label = `Last ${minutes.length} minutes: ${count(completed)} completed, ${count(failed)} failed; busiest minute ${count(peak)}`;
  return (
    <figure class="chart">
      <div class="chart-scale num">{count(peak)}/min</div>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={label} preserveAspectRatio="none">
        <line class="chart-axis" x1="0" x2={WIDTH} y1={half} y2={half} />
        {minutes.map((m, i) => {
          const up = (m.completed / peak) * (half - 4);
          const down = (m.failed / peak) * (half - 4);
          const when = new Date(m.at).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
          return (
            <g key={m.at}>
              <title>{`${when}: ${m.completed} completed, ${m.failed} failed`}</title>
              {m.completed > 0 && <rect class="bar-completed" x={i * slot + 1} y={half - up} width={bar} height={up} />}
              {m.failed > 0 && <rect class="bar-failed" x={i * slot + 1} y={half} width={bar} height={down} />}
            </g>
          );
        })}
      </svg>
      <div class="chart-ends" aria-hidden="true">
        <span>−{minutes.length} min</span>
        <span>now</span>
      </div>
      <figcaption class="num">
        <span class="legend legend-completed">{count(completed)} completed</span>
        <span class="legend legend-failed">{count(failed)} failed</span>
        <span class="muted">per minute, last hour, as this gateway saw them</span>
      </figcaption>
    </figure>
  );
}
