/**
 * Removing a directory tree with synchronous calls in slices.
 *
 * @internal
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"

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
 * Removes `root` and everything under it, as `rm -rf` does: never through a link (a link is
 * removed, not what it points at), nothing there is no error. Each call is synchronous (an
 * awaited one is a round trip through libuv's pool, about 100 µs of the main thread: three per
 * entry for `fs.rm`), and the event loop gets a turn after every `entriesPerSlice` entries, so a
 * large tree never holds it for long and a timeout around the removal fires between slices.
 *
 * @internal
 */
export const removeTree = async (root: string): Promise<void> => {
  try {
    if (!NodeFs.lstatSync(root).isDirectory()) return NodeFs.unlinkSync(root)
  } catch (e) {
    if (codeOf(e) === "ENOENT") return
    throw e
  }
  // Depth first: a directory stays on the stack below its subdirectories until they are gone.
  const stack: Array<{ readonly dir: string; listed: boolean; listings: number }> = [
    { dir: root, listed: false, listings: 0 }
  ]
  let slice = 0
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!
    if (top.listed) {
      try {
        NodeFs.rmdirSync(top.dir)
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
      let entries: Array<NodeFs.Dirent>
      try {
        entries = NodeFs.readdirSync(top.dir, { withFileTypes: true })
      } catch (e) {
        if (codeOf(e) !== "ENOENT") throw e
        stack.pop()
        continue
      }
      for (const entry of entries) {
        const path = NodePath.join(top.dir, entry.name)
        // A link's entry type is the link's own: a link to a directory is unlinked, not walked.
        if (entry.isDirectory()) {
          stack.push({ dir: path, listed: false, listings: 0 })
          continue
        }
        try {
          NodeFs.unlinkSync(path)
        } catch (e) {
          if (codeOf(e) !== "ENOENT") throw e
        }
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
}
