/**
 * Removing a directory tree with synchronous calls in slices.
 *
 * @internal
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { readRegularSync } from "./seed.js"

/**
 * Entries removed between two turns of the event loop: a synchronous unlink costs ~15 µs, so a
 * slice holds the loop for about a millisecond.
 */
const entriesPerSlice = 64

/** How often a directory that another writer refilled while it was emptied is listed again. */
const listings = 3

const codeOf = (e: unknown): string | undefined => (e as NodeJS.ErrnoException).code

const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * Gives the owner read, write and search permission on `dir` (0700), a directory of the tree
 * being removed, so what it holds can be listed and removed: tools make directories read-only
 * (Go's module cache is 0555 directories of 0444 files), and only root ignores that. Looked up
 * with `lstat` first: a link is never followed, only a plain directory this user owns is
 * changed. False when nothing changed (not such a directory, or already open to its owner).
 */
const grant = (dir: string | Buffer): boolean => {
  let info: NodeFs.Stats
  try {
    info = NodeFs.lstatSync(dir)
  } catch {
    return false
  }
  if (!info.isDirectory() || (info.mode & 0o700) === 0o700) return false
  if (typeof process.getuid === "function" && info.uid !== process.getuid()) return false
  try {
    NodeFs.chmodSync(dir, 0o700)
    return true
  } catch {
    return false
  }
}

/**
 * Runs `f`; refused for lack of permission (EACCES, EPERM), grants the owner `dirs` (outermost
 * first: searching a directory needs its parent's permission) and runs it once more. Every
 * directory given is inside the tree: nothing outside it is ever changed.
 */
const withAccess = <A>(dirs: ReadonlyArray<string | Buffer>, f: () => A): A => {
  try {
    return f()
  } catch (e) {
    const code = codeOf(e)
    if (code !== "EACCES" && code !== "EPERM") throw e
    let granted = false
    for (const dir of dirs) granted = grant(dir) || granted
    if (!granted) throw e
    return f()
  }
}

/** Unlinks a non-directory of `dir`; one already gone is no error. */
const unlinkIn = (dir: string | Buffer, path: string | Buffer): void => {
  try {
    withAccess([dir], () => NodeFs.unlinkSync(path))
  } catch (e) {
    if (codeOf(e) !== "ENOENT") throw e
  }
}

/** @internal */
export interface RemoveOptions {
  /**
   * A name directly in the root removed after everything else, just before the root itself (a
   * clone's ownership marker): a removal that fails leaves it in place.
   */
  readonly last?: string
}

/**
 * Removes `root` and everything under it, as `rm -rf` does: never through a link (a link is
 * removed, not what it points at), nothing there is no error. A directory of the tree that
 * refuses its owner (read-only, unreadable) is made 0700 and the step tried again, as `rm -rf`
 * would need `chmod -R u+rwx` first; nothing outside the tree and nothing a link points at is
 * changed. Each call is synchronous (an awaited one is a round trip through libuv's pool, about
 * 100 µs of the main thread: three per entry for `fs.rm`), and the event loop gets a turn after
 * every `entriesPerSlice` entries, so a large tree never holds it for long and a timeout around
 * the removal fires between slices. Fails with the file system's error, `options.last` still in
 * place.
 *
 * @internal
 */
export const removeTree = async (root: string, options?: RemoveOptions): Promise<void> => {
  try {
    if (!NodeFs.lstatSync(root).isDirectory()) return NodeFs.unlinkSync(root)
  } catch (e) {
    if (codeOf(e) === "ENOENT") return
    throw e
  }
  const last = options?.last
  const lastName = last === undefined ? undefined : Buffer.from(last)
  const lastPath = last === undefined ? undefined : NodePath.join(root, last)
  // What `last` held once it was removed: put back if the removal then fails (a writer refilled
  // the root), so that a clone that stays keeps its marker.
  let removedLast: { readonly content: Buffer; readonly mode: number } | undefined
  // Paths are bytes: a name that is not UTF-8 (a Latin-1 file a tool wrote) decoded to a string
  // would name another entry, or none, and its directory would never empty.
  const slash = Buffer.from("/")
  // Depth first: a directory stays on the stack below its subdirectories until they are gone.
  // `parent` is undefined for the root, whose parent is outside the tree.
  const stack: Array<{ readonly dir: Buffer; readonly parent: Buffer | undefined; listed: boolean; listings: number }> =
    [{ dir: Buffer.from(root), parent: undefined, listed: false, listings: 0 }]
  let slice = 0
  try {
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!
      const parents = top.parent === undefined ? [] : [top.parent]
      if (top.listed) {
        try {
          // Everything else is gone: the root's last entry goes now.
          if (top.parent === undefined && lastPath !== undefined && removedLast === undefined) {
            const info = NodeFs.lstatSync(lastPath, { throwIfNoEntry: false })
            const content = info?.isFile() === true ? readRegularSync(lastPath) : undefined
            if (content !== undefined) removedLast = { content, mode: info!.mode & 0o777 }
            unlinkIn(root, lastPath)
          }
          withAccess(parents, () => NodeFs.rmdirSync(top.dir))
          stack.pop()
        } catch (e) {
          const code = codeOf(e)
          if (code === "ENOENT") stack.pop()
          else if (code === "ENOTEMPTY" && top.listings < listings) top.listed = false
          else throw e
        }
      } else {
        top.listed = true
        top.listings++
        let entries: Array<NodeFs.Dirent<Buffer>>
        try {
          entries = withAccess(
            [...parents, top.dir],
            () => NodeFs.readdirSync(top.dir, { withFileTypes: true, encoding: "buffer" })
          )
        } catch (e) {
          if (codeOf(e) !== "ENOENT") throw e
          stack.pop()
          continue
        }
        for (const entry of entries) {
          if (top.parent === undefined && lastName !== undefined && entry.name.equals(lastName)) continue
          const path = Buffer.concat([top.dir, slash, entry.name])
          // A link's entry type is the link's own: a link to a directory is unlinked, not walked.
          if (entry.isDirectory()) {
            stack.push({ dir: path, parent: top.dir, listed: false, listings: 0 })
            continue
          }
          unlinkIn(top.dir, path)
          if (++slice === entriesPerSlice) {
            slice = 0
            await turn()
          }
        }
      }
      if (++slice === entriesPerSlice) {
        slice = 0
        await turn()
      }
    }
  } catch (e) {
    if (removedLast !== undefined && lastPath !== undefined) {
      try {
        // Never over an entry that took its place.
        NodeFs.writeFileSync(lastPath, removedLast.content, { flag: "wx", mode: removedLast.mode })
      } catch {
        // the root itself is gone or unwritable: nothing to keep the marker in
      }
    }
    throw e
  }
}
