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
