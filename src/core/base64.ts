/**
 * Strict encodings shared by the journal, the transparency log and the witness: one text per byte
 * string, so an encoded value is itself tamper-evident.
 */

/**
 * Decodes standard base64 with padding, or returns undefined. Node's decoder skips characters it
 * does not know, accepts the URL alphabet and ignores non-zero trailing bits, so several texts
 * decode to the same bytes; requiring the re-encoding to match makes the text itself
 * tamper-evident.
 */
export function decodeBase64Strict(text: string, expectedBytes?: number): Buffer | undefined {
  const bytes = Buffer.from(text, "base64");
  if (expectedBytes !== undefined && bytes.byteLength !== expectedBytes) return undefined;
  return bytes.toString("base64") === text ? bytes : undefined;
}
