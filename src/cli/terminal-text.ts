/**
 * Text an agent wrote (its answer, its output, the files it changed), shown on the operator's
 * terminal, which acts on what it is sent: there, the characters core/visible-text.ts names are
 * shown as stand-ins, never sent as they are; to a pipe or a file the text goes byte for byte
 * (`--json` keeps it whole either way).
 */
import { visibleText } from "../core/visible-text.js";

/** `text` as it may be shown: on a terminal, with every character that would act on it made visible. */
export function shownText(text: string, terminal: boolean): string {
  return terminal ? visibleText(text) : text;
}
