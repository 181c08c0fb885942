/**
 * "No executable content" (DESIGN.md "Bundle contract"): by file extension, decidable from the
 * manifest at begin, and by magic bytes, checked on the received bytes at commit.
 */

/** Exactly DESIGN's list, so warden refuses what gate4agent refuses and no more. */
export const EXECUTABLE_EXTENSIONS: ReadonlySet<string> = new Set([
  "exe", "com", "bat", "cmd", "ps1", "sh", "bash", "zsh", "fish", "py", "rb", "pl", "js", "mjs", "cjs",
]);

/** The extension of the last segment (after its last '.'), lower-cased, or undefined. */
export function extensionOf(relativePath: string): string | undefined {
  const name = relativePath.slice(relativePath.lastIndexOf("/") + 1);
  const dot = name.lastIndexOf(".");
  return dot === -1 ? undefined : name.slice(dot + 1).toLowerCase();
}

export function hasExecutableExtension(relativePath: string): boolean {
  const ext = extensionOf(relativePath);
  return ext !== undefined && EXECUTABLE_EXTENSIONS.has(ext);
}

const MAGIC: ReadonlyArray<{ readonly bytes: readonly number[]; readonly format: string }> = [
  { bytes: [0x23, 0x21], format: "script (#!)" },
  { bytes: [0x4d, 0x5a], format: "DOS/PE executable (MZ)" },
  { bytes: [0x7f, 0x45, 0x4c, 0x46], format: "ELF" },
  { bytes: [0xfe, 0xed, 0xfa, 0xce], format: "Mach-O" },
  { bytes: [0xfe, 0xed, 0xfa, 0xcf], format: "Mach-O" },
  { bytes: [0xce, 0xfa, 0xed, 0xfe], format: "Mach-O" },
  { bytes: [0xcf, 0xfa, 0xed, 0xfe], format: "Mach-O" },
  // 0xcafebabe is also a Java class file: refused too, a JVM class is executable content.
  { bytes: [0xca, 0xfe, 0xba, 0xbe], format: "Mach-O fat binary or Java class" },
  { bytes: [0xbe, 0xba, 0xfe, 0xca], format: "Mach-O fat binary" },
  { bytes: [0xca, 0xfe, 0xba, 0xbf], format: "Mach-O fat binary (64-bit)" },
  { bytes: [0xbf, 0xba, 0xfe, 0xca], format: "Mach-O fat binary (64-bit)" },
];

/** The longest magic: the most of a file's start `executableFormatOf` looks at. */
export const MAGIC_BYTES = Math.max(...MAGIC.map((m) => m.bytes.length));

/** The executable format `bytes` starts with, or undefined (only its first MAGIC_BYTES matter). */
export function executableFormatOf(bytes: Uint8Array): string | undefined {
  return MAGIC.find((m) => m.bytes.length <= bytes.length && m.bytes.every((b, i) => bytes[i] === b))?.format;
}
