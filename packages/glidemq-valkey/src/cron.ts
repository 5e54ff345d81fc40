import { ValidationError } from "@switchyard/core";

/*
 * The five-field cron glide-mq's job schedulers read (minute hour day-of-month month day-of-week,
 * Sunday 0): `*`, `n`, `a-b`, `*\/s`, `a-b/s` and comma lists of those. A day must match both its
 * day-of-month and its day-of-week field, as glide-mq matches it (not cron's either-or). Times are
 * wall-clock times of an IANA zone (UTC by default); a wall-clock time a DST jump skips is skipped,
 * one it repeats runs at its first instant.
 */

interface CronSpec {
  minutes: number[];
  hours: number[];
  days: Set<number>;
  months: Set<number>;
  weekdays: Set<number>;
}

/** glide-mq gives up after this many years without a match (a 30th of February never comes). */
const SEARCH_YEARS = 10;
const MINUTE = 60_000;
const DAY = 86_400_000;

function invalid(message: string): never {
  throw new ValidationError(`glidemq-valkey: ${message}`);
}

function range(from: number, to: number, step: number, min: number, max: number, part: string): number[] {
  if (step <= 0) invalid(`Invalid cron step in "${part}"`);
  if (from < min || to > max) invalid(`Cron value out of bounds in "${part}" (${min}-${max})`);
  if (from > to) invalid(`Cron range reversed in "${part}"`);
  const values: number[] = [];
  for (let value = from; value <= to; value += step) values.push(value);
  return values;
}

function parseField(field: string, min: number, max: number): number[] {
  const values = new Set<number>();
  for (const raw of field.split(",")) {
    const part = raw.trim();
    const stepped = /^\*\/(\d+)$/.exec(part);
    const spanned = /^(\d+)-(\d+)(?:\/(\d+))?$/.exec(part);
    let found: number[];
    if (part === "*") found = range(min, max, 1, min, max, part);
    else if (stepped) found = range(min, max, Number(stepped[1]), min, max, part);
    else if (spanned) found = range(Number(spanned[1]), Number(spanned[2]), Number(spanned[3] ?? 1), min, max, part);
    else if (/^\d+$/.test(part)) found = range(Number(part), Number(part), 1, min, max, part);
    else invalid(`Invalid cron token: "${part}"`);
    for (const value of found) values.add(value);
  }
  return [...values].sort((a, b) => a - b);
}

function parseCron(pattern: string): CronSpec {
  const fields = pattern.trim().split(/\s+/);
  if (fields.length !== 5) invalid(`Invalid cron pattern: expected 5 fields, got ${fields.length}`);
  const [minute, hour, day, month, weekday] = fields as [string, string, string, string, string];
  return {
    minutes: parseField(minute, 0, 59),
    hours: parseField(hour, 0, 23),
    days: new Set(parseField(day, 1, 31)),
    months: new Set(parseField(month, 1, 12)),
    weekdays: new Set(parseField(weekday, 0, 6)),
  };
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** A zone's formatter; an unknown zone is the caller's mistake. */
function formatter(zone: string): Intl.DateTimeFormat {
  let found = formatters.get(zone);
  if (!found) {
    try {
      found = new Intl.DateTimeFormat("en-US", {
        timeZone: zone,
        hourCycle: "h23",
        year: "numeric",
        month: "numeric",
        day: "numeric",
        hour: "numeric",
        minute: "numeric",
      });
    } catch {
      invalid(`Invalid timezone: ${zone}`);
    }
    formatters.set(zone, found);
  }
  return found;
}

export function checkTimezone(zone: string): void {
  formatter(zone);
}

/** The wall-clock time of `instant` in `zone`, written as if it were UTC (so it can be compared). */
function wallClock(instant: number, zone: string): number {
  const parts: Record<string, number> = {};
  for (const part of formatter(zone).formatToParts(new Date(instant))) parts[part.type] = Number(part.value);
  return Date.UTC(parts.year ?? 1970, (parts.month ?? 1) - 1, parts.day ?? 1, parts.hour ?? 0, parts.minute ?? 0);
}

/**
 * The first instant whose wall-clock time in `zone` is `wall`, or null if a DST jump skips it. The
 * zone's offsets a day before and a day after cover any one transition.
 */
function instantOf(wall: number, zone: string): number | null {
  if (zone === "UTC") return wall;
  const candidates = [wall - DAY, wall + DAY].map((probe) => wall - (wallClock(probe, zone) - probe));
  const exact = candidates.filter((instant) => wallClock(instant, zone) === wall);
  return exact.length === 0 ? null : Math.min(...exact);
}

/** The first minute strictly after `afterMs` that `pattern` matches in `zone` (UTC when omitted). */
export function nextCronRun(pattern: string, afterMs: number, zone = "UTC"): number {
  const spec = parseCron(pattern);
  const start = Math.floor(afterMs / MINUTE) * MINUTE + MINUTE;
  const startWall = wallClock(start, zone);
  const firstDay = Math.floor(startWall / DAY) * DAY;
  for (let day = firstDay; day <= firstDay + SEARCH_YEARS * 366 * DAY; day += DAY) {
    const date = new Date(day);
    if (!spec.months.has(date.getUTCMonth() + 1) || !spec.days.has(date.getUTCDate()) || !spec.weekdays.has(date.getUTCDay())) continue;
    for (const hour of spec.hours) {
      for (const minute of spec.minutes) {
        const wall = day + hour * 3_600_000 + minute * MINUTE;
        if (wall < startWall) continue;
        const instant = instantOf(wall, zone);
        if (instant !== null && instant >= start) return instant;
      }
    }
  }
  return invalid(`No cron match found within ${SEARCH_YEARS} years for pattern: ${pattern}`);
}
