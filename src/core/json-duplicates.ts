/**
 * Duplicate member names in JSON text. RFC 8259 leaves their meaning open ("SHOULD be unique"):
 * JSON.parse keeps the last, other parsers the first or refuse, so a document with one means
 * different things to different readers — to a proxy that checked it and to the node that acts
 * on it. warden refuses such documents instead of choosing for the sender.
 */

/**
 * The first member name that occurs twice in one object of `text`, undefined when none does.
 * `text` must be valid JSON (call after JSON.parse accepted it): only its structure is scanned.
 */
export function firstDuplicateName(text: string): string | undefined {
  // One entry per open container: the names seen so far for an object, null for an array.
  const open: (Set<string> | null)[] = [];
  let expectName = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i;
      for (i++; text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c /* \ */) i++;
      const names = open[open.length - 1];
      if (expectName && names !== undefined && names !== null) {
        const raw = text.slice(start + 1, i);
        // Escapes name the same member in other words ("a" and "\u0061"): compare decoded.
        const name = raw.includes("\\") ? (JSON.parse(text.slice(start, i + 1)) as string) : raw;
        if (names.has(name)) return name;
        names.add(name);
        expectName = false;
      }
    } else if (c === 0x7b /* { */) {
      open.push(new Set());
      expectName = true;
    } else if (c === 0x5b /* [ */) {
      open.push(null);
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      open.pop();
    } else if (c === 0x2c /* , */) {
      expectName = open[open.length - 1] !== null;
    }
  }
  return undefined;
}
