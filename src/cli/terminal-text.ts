/**
 * Text an agent wrote (its answer, its output, the files it changed), shown on the operator's
 * terminal. An agent is steered by text strangers wrote, and a terminal acts on what it is sent:
 * an escape sequence can set the clipboard (OSC 52), disguise a link (OSC 8), hide or overwrite
 * lines; bidirectional overrides make text read other than it is. On a terminal such characters
 * are shown as visible stand-ins (U+2400's control pictures, `\u{…}` for the rest), never sent as
 * they are; to a pipe or a file the text goes byte for byte (`--json` keeps it whole either way).
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

/** `text` as it may be shown: on a terminal, with every character that would act on it made visible. */
export function shownText(text: string, terminal: boolean): string {
  return terminal ? text.replace(UNSAFE, standIn) : text;
}
