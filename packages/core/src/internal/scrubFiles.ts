/**
 * Scrubbing token values out of the files a provider process wrote into its execution clone
 * (transcripts, tool output, logs), in place: the marker has the token's length, so only the
 * token's bytes are overwritten and a process of another run appending to the same file loses
 * nothing. SQLite databases, their write-ahead logs, log indexes and journals are left as they are
 * (see `isDatabase`).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as NodeFsSync from "node:fs"
import * as NodeFs from "node:fs/promises"
import * as NodePath from "node:path"

/** @internal */
export interface Options {
  /** Directories walked (the clone's profile directory and its siblings). */
  readonly roots: ReadonlyArray<string>
  /** Only files modified at or after this time (ms since the epoch) are read. */
  readonly since: number
  /** Absolute paths never touched (the files the driver materialized). */
  readonly skip: ReadonlySet<string>
  /** Length-preserving replacement of the live token values. */
  readonly redact: (bytes: Uint8Array) => Uint8Array
  /**
   * Files removed instead of scrubbed (a plain run's own session entries, which nothing reads
   * again); each one's parent directories, up to the root, are removed too while they are empty
   * and `discard` claims them (asked with the directory's path and a trailing separator).
   */
  readonly discard?: ((path: string) => boolean) | undefined
  /** Called with every file the walk found that `discard` did not claim, once it was scrubbed. */
  readonly seen?: ((file: string) => void) | undefined
}

const chunkBytes = 1024 * 1024
/** A token is 43 bytes: a window overlapping the next by 42 bytes sees every occurrence whole. */
const overlap = 42
/**
 * How long before `since` a file's modification time may fall and the file still count as the
 * run's. A file system that keeps sub-second times (ext4, xfs, btrfs, tmpfs, APFS, exFAT's 10 ms)
 * stamps a write with the kernel's coarse clock, at most a tick (10 ms at the slowest) behind the
 * clock `since` was read from: `fineSlack` covers a tick and exFAT's step. One that keeps whole
 * seconds (ext3, HFS+, FAT's two) gives a time on a whole second: such a time counts from
 * `coarseSlack` before. (A time of a fine file system that happens to fall on a whole second is
 * read as coarse: the file is read, never missed.)
 */
const fineSlack = 25
const coarseSlack = 2000

/** Whether a file modified at `mtimeMs` may have been written at or after `since`. */
const modifiedSince = (mtimeMs: number, since: number): boolean =>
  mtimeMs >= since - (mtimeMs % 1000 === 0 ? coarseSlack : fineSlack)

const sqliteHeader = Buffer.from("SQLite format 3\0", "latin1")
const journalHeader = Buffer.from([0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7])

/**
 * A SQLite database, its write-ahead log, the log's index or a rollback journal (by its name
 * beside the database, or by its header or magic number): never rewritten. A log checksums each
 * frame together with every frame before it (and its index keeps the last checksum), so even a
 * length-preserving rewrite makes SQLite drop the frames from the first one changed on; a journal
 * is copied back over the database when it is hot; and in the database itself an index entry (or
 * a `WITHOUT ROWID` table's row) holding a token sits where the token sorts, where the marker does
 * not: a lookup through that index would miss the row, and a later write could corrupt the tree.
 */
const isDatabase = (name: string, head: Buffer): boolean =>
  /-(wal|shm|journal)$/.test(name) || head.subarray(0, sqliteHeader.length).equals(sqliteHeader) ||
  (head.length >= 4 && (head.readUInt32BE(0) & 0xfffffffe) === 0x377f0682) ||
  head.subarray(0, journalHeader.length).equals(journalHeader)

const sameBytes = (a: Uint8Array, b: Uint8Array, from: number, to: number): boolean => {
  for (let i = from; i < to; i++) if (a[i] !== b[i]) return false
  return true
}

/** Reads and writes of one open file, at given positions. */
interface FileIo {
  readonly read: (buffer: Uint8Array, offset: number, length: number, position: number) => number | Promise<number>
  readonly write: (buffer: Uint8Array, offset: number, length: number, position: number) => unknown
  readonly close: () => unknown
}

/**
 * Files up to this size are scrubbed with synchronous calls: an awaited call is a round trip
 * through libuv's pool and back through the event loop (~100 µs of the main thread each, and a
 * scrub makes at least three: open, read, close), a synchronous one a few microseconds. Larger
 * ones go through the pool, so a long transcript never holds the loop.
 */
const syncBytes = chunkBytes
/** Small files scrubbed between two yields to the event loop (~1 ms of synchronous calls). */
const filesPerSlice = 64

const openSync = (file: string): FileIo => {
  const fd = NodeFsSync.openSync(file, "r+")
  return {
    read: (buffer, offset, length, position) => NodeFsSync.readSync(fd, buffer, offset, length, position),
    write: (buffer, offset, length, position) => NodeFsSync.writeSync(fd, buffer, offset, length, position),
    close: () => NodeFsSync.closeSync(fd)
  }
}

const openAsync = async (file: string): Promise<FileIo> => {
  const handle = await NodeFs.open(file, "r+")
  return {
    read: async (buffer, offset, length, position) => (await handle.read(buffer, offset, length, position)).bytesRead,
    write: (buffer, offset, length, position) => handle.write(buffer, offset, length, position),
    close: () => handle.close()
  }
}

/**
 * Rewrites the changed byte ranges of one file, re-checking each range just before writing it.
 * `size` is the file's size when it was found: the read buffer is sized to it (a session file
 * of a few KiB does not get a zero-filled MiB), and a file that grew since is read on in steps
 * of that size (through the pool: only its first read may be synchronous).
 *
 * @internal
 */
export const scrubFile = async (
  file: string,
  name: string,
  size: number,
  redact: Options["redact"]
): Promise<number> => {
  let io: FileIo | undefined = size <= syncBytes ? openSync(file) : await openAsync(file)
  let sync = size <= syncBytes
  let rewritten = 0
  try {
    const step = Math.max(1, Math.min(chunkBytes, size))
    const buffer = Buffer.alloc(step + overlap)
    let position = 0
    let first = true
    for (;;) {
      const bytesRead = await io.read(buffer, 0, buffer.length, position)
      if (bytesRead === 0) break
      const window = buffer.subarray(0, bytesRead)
      if (first && isDatabase(name, window)) return 0
      first = false
      const redacted = redact(window)
      if (redacted !== window) {
        let i = 0
        while (i < bytesRead) {
          if (redacted[i] === window[i]) {
            i++
            continue
          }
          let end = i
          while (end < bytesRead && redacted[end] !== window[end]) end++
          // Another writer may have changed the file since it was read: write only over the
          // bytes that are still the ones that were read.
          const current = Buffer.alloc(end - i)
          await io.read(current, 0, current.length, position + i)
          if (sameBytes(current, window.subarray(i, end), 0, current.length)) {
            await io.write(redacted, i, end - i, position + i)
            rewritten++
          }
          i = end
        }
      }
      if (bytesRead < buffer.length) break
      position += step
      if (sync) {
        // It grew since it was found (a writer of another run): the rest goes through the pool.
        const done = io
        io = undefined
        await done.close()
        io = await openAsync(file)
        sync = false
      }
    }
    return rewritten
  } finally {
    await io?.close()
  }
}

/** Entries looked at between two yields to the event loop (~1 ms of synchronous calls). */
const entriesPerSlice = 256

/**
 * The regular files under `roots` the run may have written. The clone keeps every thread's
 * session and what the CLI keeps beside its sessions (Claude Code writes an MCP log per run),
 * so the walk visits thousands of entries on a long-lived agent: it reads each directory with
 * its entry types (no `lstat` for a directory or a link) and calls `lstat` synchronously for the
 * regular files only, which costs a few microseconds an entry where an awaited call costs
 * ~100 µs of the main thread. It yields to the event loop every `entriesPerSlice` entries, so no
 * slice blocks it for long.
 */
const walk = async (options: Options): Promise<Array<{ readonly file: string; readonly size: number }>> => {
  const found: Array<{ readonly file: string; readonly size: number }> = []
  const directories = [...options.roots].reverse()
  let slice = 0
  while (directories.length > 0) {
    const dir = directories.pop()!
    let entries: Array<NodeFsSync.Dirent>
    try {
      entries = NodeFsSync.readdirSync(dir, { withFileTypes: true })
    } catch {
      continue
    }
    const below: Array<string> = []
    for (const entry of entries) {
      if (++slice === entriesPerSlice) {
        slice = 0
        await new Promise<void>((resolve) => setImmediate(resolve))
      }
      // Never through a link (the clone links the user's auth).
      if (entry.isSymbolicLink()) continue
      const absolute = NodePath.join(dir, entry.name)
      if (entry.isDirectory()) {
        below.push(absolute)
        continue
      }
      if (!entry.isFile() || options.skip.has(absolute)) continue
      let info: NodeFsSync.Stats | undefined
      try {
        info = NodeFsSync.lstatSync(absolute, { throwIfNoEntry: false })
      } catch {
        continue
      }
      // Read again from the entry itself (it may have changed since the directory was read);
      // never a file shared by another link (a hard-linked auth file is the user's own).
      if (
        info !== undefined && info.isFile() && info.nlink === 1 && modifiedSince(info.mtimeMs, options.since)
      ) {
        found.push({ file: absolute, size: info.size })
      }
    }
    // Depth first, in the directory's order.
    for (let i = below.length - 1; i >= 0; i--) directories.push(below[i]!)
  }
  return found
}

/**
 * Removes `file`, then its parent directories below the root that holds it, while they are
 * empty and `claims` them. Never fails: what cannot be removed (gone, refilled) stays.
 */
const discard = (file: string, roots: ReadonlyArray<string>, claims: (path: string) => boolean): void => {
  try {
    NodeFsSync.unlinkSync(file)
  } catch {
    return
  }
  const root = roots.find((dir) => file.startsWith(dir + NodePath.sep))
  if (root === undefined) return
  for (
    let dir = NodePath.dirname(file);
    dir.length > root.length && claims(dir + NodePath.sep);
    dir = NodePath.dirname(dir)
  ) {
    try {
      NodeFsSync.rmdirSync(dir)
    } catch {
      return
    }
  }
}

/**
 * Replaces the live token values in every regular file under `roots` modified since `since`, or
 * removes those that `discard` claims.
 * Never fails: a file that vanished or cannot be opened is left alone. Returns the files it
 * rewrote.
 *
 * @internal
 */
export const scrub = (options: Options): Effect.Effect<ReadonlyArray<string>> =>
  Effect.promise(async () => {
    const found = await walk(options)
    const changed: Array<string> = []
    // The small files are read synchronously: the loop gets a turn after every `syncBytes` of
    // them or `filesPerSlice` files (~1 ms), so a run that wrote many never holds it for long.
    let bytes = 0
    let files = 0
    for (const { file, size } of found) {
      if (options.discard?.(file) === true) {
        discard(file, options.roots, options.discard)
      } else {
        // A file shorter than a token cannot hold one.
        if (size > overlap) {
          try {
            if ((await scrubFile(file, NodePath.basename(file), size, options.redact)) > 0) changed.push(file)
          } catch {
            // Gone, or not ours to open: nothing was written.
          }
        }
        options.seen?.(file)
      }
      if (size > syncBytes) continue
      bytes += size
      if (++files === filesPerSlice || bytes >= syncBytes) {
        bytes = 0
        files = 0
        await new Promise<void>((resolve) => setImmediate(resolve))
      }
    }
    return changed
  })
