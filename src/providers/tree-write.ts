/**
 * Builds a materialization's temp tree by descriptor. The tree lives under the materializations
 * root, where any process of the node's user (an agent's leftover) can rename a directory and put
 * a symlink in its place while warden writes. Creating `<temp>/bundle/skills/x/SKILL.md` by path
 * would then write through the link, into a directory warden never created (`~/.claude/skills`,
 * say). Here every directory is opened O_NOFOLLOW once it is made, and each child is created
 * through its parent's descriptor (storage/descriptor-paths), so whatever is written lands in a
 * directory warden made. Before the tree is published, each directory must still be where it was
 * made; otherwise the build is refused (`materialize-tree-changed`), never published.
 */
import * as fsp from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { IntegrityError, errnoCode } from "../core/errors.js";
import { createPrivateFile } from "../storage/secure-fs.js";
import { DIR_NOFOLLOW, entryOf, heldAt, locationOf } from "../storage/descriptor-paths.js";
import { safeJoin } from "../delivery/paths.js";
import { TREE_DIR_MODE } from "./tree-audit.js";

/** Errors that mean an entry of the tree was replaced, moved or planted while being built. */
const SWAP_ERRNOS = new Set(["ELOOP", "ENOTDIR", "ENOENT", "EEXIST"]);

function treeChanged(top: string, rel: string, cause?: unknown): IntegrityError {
  return new IntegrityError("materialize-tree-changed", `${JSON.stringify(rel)} under ${JSON.stringify(top)} was moved or replaced while the tree was built`, {
    details: { path: rel },
    status: 500,
    cause,
  });
}

export class TreeWriter {
  readonly #top: string;
  /** Where the top directory was when opened, by the kernel's name (ancestors' links resolved). */
  #location = "";
  /** Open directories by path relative to the top ("" is the top), parents before children. */
  readonly #dirs = new Map<string, fsp.FileHandle>();

  private constructor(top: string) {
    this.#top = top;
  }

  /** Opens the directory just created at `top`, made exactly 0700. */
  static async open(top: string): Promise<TreeWriter> {
    const tree = new TreeWriter(top);
    try {
      const handle = await tree.#adopt("", top);
      tree.#location = locationOf(handle.fd, top);
    } catch (error) {
      await tree.close();
      throw error;
    }
    return tree;
  }

  /** Creates directory `rel` (0700); its parent must have been created or be the top. */
  async mkdir(rel: string): Promise<void> {
    const entry = this.#entry(rel);
    try {
      await fsp.mkdir(entry, { mode: TREE_DIR_MODE });
    } catch (error) {
      throw SWAP_ERRNOS.has(errnoCode(error) ?? "") ? treeChanged(this.#top, rel, error) : error;
    }
    await this.#adopt(rel, entry);
  }

  /** Creates file `rel` (new, 0600, O_NOFOLLOW) in its parent directory's descriptor. */
  async createFile(rel: string): Promise<fsp.FileHandle> {
    try {
      return await createPrivateFile(this.#entry(rel));
    } catch (error) {
      // createPrivateFile names a planted symlink itself; a directory removed under us is a swap too.
      throw SWAP_ERRNOS.has(errnoCode(error) ?? "") ? treeChanged(this.#top, rel, error) : error;
    }
  }

  /** fsyncs every directory, children before parents, so each entry is durable before its parent's. */
  async sync(): Promise<void> {
    for (const handle of [...this.#dirs.values()].reverse()) await handle.sync();
  }

  /**
   * Throws `materialize-tree-changed` unless every directory is still where it was made: under the
   * top, and the top where it was opened, or renamed to `renamedTo` beside it.
   */
  checkInPlace(renamedTo?: string): void {
    const top = renamedTo === undefined ? this.#location : join(dirname(this.#location), basename(renamedTo));
    for (const [rel, handle] of this.#dirs) {
      if (!heldAt(handle.fd, rel === "" ? top : join(top, rel))) throw treeChanged(this.#top, rel === "" ? "." : rel);
    }
  }

  async close(): Promise<void> {
    for (const handle of this.#dirs.values()) await handle.close().catch(() => undefined);
    this.#dirs.clear();
  }

  /** `rel` through its parent's descriptor; `rel` is checked as a manifest path (no `..`, no `/`-led). */
  #entry(rel: string): string {
    const byPath = safeJoin(this.#top, rel);
    const slash = rel.lastIndexOf("/");
    const parent = this.#dirs.get(slash < 0 ? "" : rel.slice(0, slash));
    if (parent === undefined) throw treeChanged(this.#top, rel);
    return entryOf(parent.fd, rel.slice(slash + 1), byPath);
  }

  async #adopt(rel: string, entry: string): Promise<fsp.FileHandle> {
    let handle: fsp.FileHandle;
    try {
      handle = await fsp.open(entry, DIR_NOFOLLOW);
    } catch (error) {
      throw SWAP_ERRNOS.has(errnoCode(error) ?? "") ? treeChanged(this.#top, rel === "" ? "." : rel, error) : error;
    }
    this.#dirs.set(rel, handle);
    // The exact mode whatever the umask, set on the directory itself, never through a path.
    await handle.chmod(TREE_DIR_MODE);
    return handle;
  }
}
