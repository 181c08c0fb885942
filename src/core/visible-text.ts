/**
 * Text an agent wrote, made safe to show a person: an agent is steered by text strangers wrote,
 * and the characters below act on what shows them. On a terminal an escape sequence can set the
 * clipboard (OSC 52), disguise a link (OSC 8), hide or overwrite lines; anywhere, bidirectional
 * overrides and isolates make text read other than it is (a file `evil\u202Etxt.sh` reads as
 * `evilhs.txt`). Each is replaced by a visible stand-in: U+2400's control pictures for C0 and
 * DEL, `\u{…}` for the rest. Pure, so the console's bundle shares it with the CLI.
 */

// C0 controls but tab and newline, DEL, C1 controls, and the bidirectional embeddings, overrides and isolates.
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

function standIn(char: string): string {
  const code = char.codePointAt(0)!;
  if (code < 0x20) return String.fromCodePoint(0x2400 + code);
  if (code === 0x7f) return "\u2421";
  return `\\u{${code.toString(16)}}`;
}

/** `text` with every character that would act on its reader made visible. */
export function visibleText(text: string): string {
  return text.replace(UNSAFE, standIn);
}
