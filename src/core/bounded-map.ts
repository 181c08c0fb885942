/**
 * A Map for memories of hot paths (what a replay has already read and checked): it keeps at most
 * `maxEntries` entries and `maxWeight` total weight (bytes, typically), forgetting the least
 * recently used first, so a memory can never grow with the store behind it.
 */
export class BoundedMap<K, V> {
  readonly #maxEntries: number;
  readonly #maxWeight: number;
  readonly #entries = new Map<K, { readonly value: V; readonly weight: number }>();
  #weight = 0;

  constructor(maxEntries: number, maxWeight: number) {
    this.#maxEntries = maxEntries;
    this.#maxWeight = maxWeight;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The value under `key`, which becomes the most recently used. */
  get(key: K): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.value;
  }

  /** Remembers `value`; one heavier than a quarter of the bound is not kept at all. */
  set(key: K, value: V, weight: number): void {
    this.delete(key);
    if (weight > this.#maxWeight / 4) return;
    this.#entries.set(key, { value, weight });
    this.#weight += weight;
    for (const [oldest, entry] of this.#entries) {
      if (this.#entries.size <= this.#maxEntries && this.#weight <= this.#maxWeight) break;
      this.#entries.delete(oldest);
      this.#weight -= entry.weight;
    }
  }

  delete(key: K): void {
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    this.#entries.delete(key);
    this.#weight -= entry.weight;
  }

  clear(): void {
    this.#entries.clear();
    this.#weight = 0;
  }
}

/**
 * Which keys came back soon: the admission test in front of a BoundedMap of `window` entries. A
 * key seen only once within the last `window` sightings would be forgotten by that map before it
 * is asked for again (ids that cycle through more than it holds), so remembering it costs a copy
 * and garbage for nothing; one seen twice within them is worth keeping. Sightings are fixed-size
 * hash slots, nothing is allocated per key: a slot another key takes over may forget a sighting
 * (the key is then kept one sighting later), and a false "seen" needs a full 32-bit hash match.
 */
export class RecentSightings {
  readonly #window: number;
  readonly #mask: number;
  readonly #hashes: Int32Array;
  readonly #seenAt: Float64Array;
  #sightings = 0;

  constructor(window: number) {
    this.#window = window;
    // A quarter full at most: most sightings within the window keep their own slot.
    let size = 16;
    while (size < window * 4) size *= 2;
    this.#mask = size - 1;
    this.#hashes = new Int32Array(size);
    this.#seenAt = new Float64Array(size).fill(-Infinity);
  }

  /** Records a sighting of `key`: true when it was also seen among the `window` sightings before. */
  seenRecently(key: string): boolean {
    const hash = fnv1a(key);
    const slot = hash & this.#mask;
    const now = ++this.#sightings;
    const recent = this.#hashes[slot] === hash && now - this.#seenAt[slot]! <= this.#window;
    this.#hashes[slot] = hash;
    this.#seenAt[slot] = now;
    return recent;
  }
}

function fnv1a(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return hash | 0;
}
