/**
 * Keeps an insertion-ordered Map (a cache, a registry) within `most` entries: once it holds more, its
 * oldest entries go, down to nine tenths of `most`, in one walk.
 *
 * Why not the oldest one per insert (`map.delete(map.keys().next().value)`): V8 leaves a deleted
 * entry as a hole in the Map's table until the table is rebuilt, and a new iterator steps over every
 * hole at the front, so at the cap each insert walks past the entries dropped since the last rebuild:
 * 9-11 µs per insert at 10,000 entries and 25-65 µs at 100,000 (from run to run), where one walk
 * that drops a tenth at once costs 0.2-0.3 and 0.6-0.7 µs (Node 20, `npm run bench -- bounded`).
 */
export function dropOldest<K, V>(map: Map<K, V>, most: number): void {
  if (map.size <= most) return;
  let drop = map.size - most + Math.floor(most / 10);
  for (const key of map.keys()) {
    if (drop-- <= 0) return;
    map.delete(key);
  }
}

/** Sets `key` as the map's newest entry (moved to the end when it was there) and keeps the map within `most`. */
export function setNewest<K, V>(map: Map<K, V>, key: K, value: V, most: number): void {
  map.delete(key);
  map.set(key, value);
  dropOldest(map, most);
}
