/** How numbers, times and values read on the page. */

const numbers = new Intl.NumberFormat();
export const count = (n: number) => numbers.format(n);

export function time(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  return new Date(ms).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

export function duration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return "—";
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(ms)} ms`;
  if (abs < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (abs < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((abs % 60_000) / 1000)} s`;
  if (abs < 86_400_000) return `${Math.floor(ms / 3_600_000)} h ${Math.round((abs % 3_600_000) / 60_000)} min`;
  return `${(ms / 86_400_000).toFixed(1)} days`;
}

export function relative(ms: number | null, now = Date.now()): string {
  if (ms === null) return "—";
  const delta = ms - now;
  return delta >= 0 ? `in ${duration(delta)}` : `${duration(-delta)} ago`;
}

export function pretty(value: unknown): string {
  if (value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}
