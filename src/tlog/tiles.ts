/**
 * C2SP tlog-tiles paths (c2sp.org/tlog-tiles): `tile/<L>/<N>[.p/<W>]` and
 * `tile/entries/<N>[.p/<W>]`, N as zero-padded 3-digit elements, all but the last prefixed `x`
 * (1234067 → `x001/x234/067`). A tile at level L holds the stored nodes of tree level 8·L.
 */
export const TILE_HEIGHT = 8;
export const TILE_WIDTH = 256;
/** Entry bundles prefix each entry with a big-endian uint16 length. */
export const MAX_ENTRY_BYTES = 0xffff;

export interface TileRef {
  /** the tile level, or "entries" for an entry bundle */
  readonly level: number | "entries";
  readonly index: number;
  /** 1..255 for a partial tile; undefined for a full one */
  readonly width?: number;
}

export function formatTileIndex(index: number): string {
  const groups: string[] = [];
  let n = index;
  do {
    groups.unshift(String(n % 1000).padStart(3, "0"));
    n = Math.floor(n / 1000);
  } while (n > 0);
  return groups.map((g, i) => (i < groups.length - 1 ? `x${g}` : g)).join("/");
}

export function formatTilePath(tile: TileRef): string {
  const partial = tile.width === undefined ? "" : `.p/${tile.width}`;
  return `tile/${tile.level}/${formatTileIndex(tile.index)}${partial}`;
}

/** Parses the part after `tile/`; undefined for anything that is not a canonical tile path. */
export function parseTilePath(path: string): TileRef | undefined {
  const match = /^(entries|0|[1-9][0-9]?)\/((?:x[0-9]{3}\/)*)([0-9]{3})(?:\.p\/([1-9][0-9]{0,2}))?$/.exec(path);
  if (match === null) return undefined;
  const level = match[1] === "entries" ? "entries" : Number(match[1]);
  if (level !== "entries" && level > 63) return undefined;
  const groups = [...match[2]!.split("/").filter((g) => g !== "").map((g) => g.slice(1)), match[3]!];
  // No leading zero group: `x000/001` would name the same tile as `001`.
  if (groups.length > 1 && groups[0] === "000") return undefined;
  if (groups.length > 6) return undefined;
  const index = groups.reduce((n, g) => n * 1000 + Number(g), 0);
  const width = match[4] === undefined ? undefined : Number(match[4]);
  if (width !== undefined && width > 255) return undefined;
  return width === undefined ? { level, index } : { level, index, width };
}
