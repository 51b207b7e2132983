import { SqliteClient } from "@effect/sql-sqlite-node"
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as ScrubFiles from "../src/internal/scrubFiles.js"

// A token is 43 characters; the replacement has the same length (files are rewritten in place).
const token = "tok_".padEnd(43, "Q")
const marker = "#".repeat(43)
const tokenBytes = Buffer.from(token, "latin1")

const redact = (bytes: Uint8Array): Uint8Array => {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let at = buffer.indexOf(tokenBytes)
  if (at === -1) return bytes
  const copy = Buffer.from(buffer)
  while (at !== -1) {
    copy.write(marker, at, "latin1")
    at = buffer.indexOf(tokenBytes, at + tokenBytes.length)
  }
  return copy
}

const withDir = <A>(body: (dir: string) => Effect.Effect<A>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => Fs.mkdtempSync(NodePath.join(Os.tmpdir(), "tether-scrub-"))),
    body,
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )

describe("ScrubFiles", () => {
  it.live("replaces every token in small files and across the 1 MiB read windows of a large one", () =>
    withDir((dir) =>
      Effect.gen(function*() {
        const small = NodePath.join(dir, "session.jsonl")
        Fs.writeFileSync(small, `{"a":"${token}"}\n{"b":"x${token}"}`)
        // Tokens straddling each window boundary (1 MiB), and one at the very end.
        const mib = 1024 * 1024
        const large = Buffer.alloc(2 * mib + 100, "x")
        for (const at of [mib - 20, 2 * mib - 1, large.length - token.length]) large.write(token, at, "latin1")
        Fs.mkdirSync(NodePath.join(dir, "nested"))
        const big = NodePath.join(dir, "nested", "log.txt")
        Fs.writeFileSync(big, large)
        const changed = yield* ScrubFiles.scrub({ roots: [dir], since: 0, skip: new Set(), redact })
        expect([...changed].sort()).toEqual([big, small].sort())
        const smallAfter = Fs.readFileSync(small, "latin1")
        expect(smallAfter).toBe(`{"a":"${marker}"}\n{"b":"x${marker}"}`)
        const bigAfter = Fs.readFileSync(big)
        expect(bigAfter.length).toBe(large.length)
        expect(bigAfter.includes(tokenBytes)).toBe(false)
        expect(bigAfter.toString("latin1").split(marker).length - 1).toBe(3)
      })
    ))

  it.live("leaves alone files older than the run, the skipped ones and files without a token", () =>
    withDir((dir) =>
      Effect.gen(function*() {
        const old = NodePath.join(dir, "old.txt")
        const skipped = NodePath.join(dir, "skipped.txt")
        const clean = NodePath.join(dir, "clean.txt")
        for (const file of [old, skipped]) Fs.writeFileSync(file, `before ${token} after`)
        Fs.writeFileSync(clean, "nothing secret here, long enough to be read at all")
        const past = new Date(Date.now() - 60_000)
        Fs.utimesSync(old, past, past)
        const changed = yield* ScrubFiles.scrub({
          roots: [dir],
          since: Date.now() - 1000,
          skip: new Set([skipped]),
          redact
        })
        expect(changed).toEqual([])
        expect(Fs.readFileSync(old, "latin1")).toContain(token)
        expect(Fs.readFileSync(skipped, "latin1")).toContain(token)
      })
    ))

  it.live("reads a file of just before the run only when its time is a coarse file system's (a whole second)", () =>
    withDir((dir) =>
      Effect.gen(function*() {
        // A run that started 1.5 s after a whole second.
        const second = Math.floor(Date.now() / 1000) * 1000 - 10_000
        const since = second + 1500
        const stamp = (name: string, ms: number) => {
          const file = NodePath.join(dir, name)
          Fs.writeFileSync(file, `before ${token} after`)
          Fs.utimesSync(file, ms / 1000, ms / 1000)
          return file
        }
        // A fine-grained time 1.5 s before the run: a session of an earlier run, not this one's.
        const earlier = stamp("earlier.jsonl", since - 1499.5)
        // A fine-grained time within a clock tick of the run's start: the run's own.
        const tick = stamp("tick.jsonl", since - 8.25)
        // A whole-second time 1.5 s before: a coarse file system's stamp of a write after `since`.
        const coarse = stamp("coarse.jsonl", second)
        // A whole-second time further back than the coarse slack.
        const old = stamp("old.jsonl", second - 1000)
        expect(Fs.statSync(earlier).mtimeMs % 1000).not.toBe(0)
        expect(Fs.statSync(coarse).mtimeMs % 1000).toBe(0)
        const changed = yield* ScrubFiles.scrub({ roots: [dir], since, skip: new Set(), redact })
        expect([...changed].sort()).toEqual([coarse, tick].sort())
        expect(Fs.readFileSync(earlier, "latin1")).toContain(token)
        expect(Fs.readFileSync(old, "latin1")).toContain(token)
        expect(Fs.readFileSync(tick, "latin1")).not.toContain(token)
        expect(Fs.readFileSync(coarse, "latin1")).not.toContain(token)
      })
    ))

  it.live("never goes through a link, never rewrites a hard-linked file, and finds files deep down", () =>
    withDir((outside) =>
      withDir((dir) =>
        Effect.gen(function*() {
          const theirs = NodePath.join(outside, "auth.json")
          Fs.writeFileSync(theirs, `{"token":"${token}"}`)
          Fs.mkdirSync(NodePath.join(outside, "tree"))
          const theirsBelow = NodePath.join(outside, "tree", "log.txt")
          Fs.writeFileSync(theirsBelow, `line ${token}`)
          Fs.symlinkSync(theirs, NodePath.join(dir, "auth.json"))
          Fs.symlinkSync(NodePath.join(outside, "tree"), NodePath.join(dir, "tree"))
          const linked = NodePath.join(dir, "linked.json")
          Fs.linkSync(theirs, linked)
          const deep = NodePath.join(dir, "a", "b", "c", "session.jsonl")
          Fs.mkdirSync(NodePath.dirname(deep), { recursive: true })
          Fs.writeFileSync(deep, `{"text":"${token}"}`)
          const changed = yield* ScrubFiles.scrub({ roots: [dir], since: 0, skip: new Set(), redact })
          expect(changed).toEqual([deep])
          expect(Fs.readFileSync(deep, "latin1")).toBe(`{"text":"${marker}"}`)
          for (const file of [theirs, theirsBelow, linked]) expect(Fs.readFileSync(file, "latin1")).toContain(token)
        })
      )
    ))

  it.live("walks a clone of a thousand entries in slices, the event loop running between them", () =>
    withDir((dir) =>
      Effect.gen(function*() {
        // What a long-lived agent's clone looks like: a session file per earlier run.
        const sessions = NodePath.join(dir, "sessions")
        Fs.mkdirSync(sessions)
        for (let i = 0; i < 1000; i++) {
          Fs.writeFileSync(
            NodePath.join(sessions, `${String(i).padStart(4, "0")}.jsonl`),
            `{"run":${i},"token":"${token}"}`
          )
        }
        // A run that starts after all of them: nothing is read or written, only the walk gives way to timers.
        let turns = 0
        const timer = setInterval(() => turns++, 0)
        const changed = yield* ScrubFiles.scrub({ roots: [dir], since: Date.now() + 60_000, skip: new Set(), redact })
        clearInterval(timer)
        expect(changed).toEqual([])
        // A walk in one synchronous piece would let no timer run before it ends.
        expect(turns).toBeGreaterThan(0)
      })
    ))

  it.live("scrubs many small files in slices, the event loop running between them", () =>
    withDir((dir) =>
      Effect.gen(function*() {
        // Fewer entries than a walk's slice: only the scrub of the files can give way to timers.
        const files: Array<string> = []
        for (let i = 0; i < 200; i++) {
          const file = NodePath.join(dir, `${String(i).padStart(3, "0")}.log`)
          Fs.writeFileSync(file, `${"x".repeat(16 * 1024)}${token}\n`)
          files.push(file)
        }
        let turns = 0
        const timer = setInterval(() => turns++, 0)
        const changed = yield* ScrubFiles.scrub({ roots: [dir], since: 0, skip: new Set(), redact })
        clearInterval(timer)
        expect([...changed].sort()).toEqual(files)
        for (const file of files) expect(Fs.readFileSync(file, "latin1").endsWith(`${marker}\n`)).toBe(true)
        expect(turns).toBeGreaterThan(0)
      })
    ))

  it.live("reads on through the pool a small file that grew since it was found", () =>
    withDir((dir) =>
      Effect.gen(function*() {
        // Found at 64 KiB (read synchronously), now 2.5 MiB (read on through the pool): tokens in the
        // first window, across window boundaries and at the end.
        const file = NodePath.join(dir, "grown.jsonl")
        const mib = 1024 * 1024
        const content = Buffer.alloc(2 * mib + mib / 2, "x")
        const at = [100, 64 * 1024 - 10, mib - 20, mib + 100, 2 * mib + 1000, content.length - token.length]
        for (const position of at) content.write(token, position, "latin1")
        Fs.writeFileSync(file, content)
        const rewritten = yield* Effect.promise(() => ScrubFiles.scrubFile(file, "grown.jsonl", 64 * 1024, redact))
        expect(rewritten).toBe(at.length)
        const after = Fs.readFileSync(file)
        expect(after.length).toBe(content.length)
        expect(after.includes(tokenBytes)).toBe(false)
        expect(after.toString("latin1").split(marker).length - 1).toBe(at.length)
      })
    ))

  it.live("never rewrites a SQLite database, its write-ahead log nor a journal; a plain file beside is scrubbed", () =>
    withDir((dir) =>
      Effect.gen(function*() {
        // A CLI's database in the clone (Codex's `state_5.sqlite`), the token in a UNIQUE column:
        // its index entry sits where the token sorts, where the marker ("[") does not, so a
        // rewritten index would miss the row.
        const filename = NodePath.join(dir, "state_5.sqlite")
        const open = Effect.map(
          Layer.build(SqliteClient.layer({ filename })),
          (context) => Context.get(context, SqliteClient.SqliteClient)
        )
        yield* Effect.scoped(Effect.gen(function*() {
          const sql = yield* open
          yield* sql.unsafe(`CREATE TABLE env (id INTEGER PRIMARY KEY, value TEXT UNIQUE)`)
          let id = 0
          for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") {
            yield* sql`INSERT INTO env (id, value) VALUES (${id++}, ${`${c}-plain`})`
          }
          yield* sql`INSERT INTO env (id, value) VALUES (${100}, ${`q${token}`})`
        }))
        expect(Fs.readFileSync(filename).includes(tokenBytes)).toBe(true)
        // A write-ahead log and a journal left by a killed process, and a log under another name.
        const wal = `${filename}-wal`
        const journal = NodePath.join(dir, "logs_1.sqlite-journal")
        const walHeader = Buffer.alloc(32)
        walHeader.writeUInt32BE(0x377f0682, 0)
        const stray = NodePath.join(dir, "frames.bin")
        // A rollback journal under another name: found by its magic number.
        const strayJournal = NodePath.join(dir, "pages.bin")
        const journalMagic = Buffer.from([0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7])
        Fs.writeFileSync(wal, Buffer.concat([walHeader, Buffer.from(`frame ${token}`, "latin1")]))
        Fs.writeFileSync(stray, Buffer.concat([walHeader, Buffer.from(`frame ${token}`, "latin1")]))
        Fs.writeFileSync(strayJournal, Buffer.concat([journalMagic, Buffer.from(`page ${token}`, "latin1")]))
        Fs.writeFileSync(journal, `page ${token}`)
        const plain = NodePath.join(dir, "history.log")
        Fs.writeFileSync(plain, `env=${token}\n`)
        const changed = yield* ScrubFiles.scrub({ roots: [dir], since: 0, skip: new Set(), redact })
        expect(changed).toEqual([plain])
        for (const file of [filename, wal, journal, stray, strayJournal]) {
          expect(Fs.readFileSync(file).includes(tokenBytes)).toBe(true)
        }
        Fs.rmSync(wal)
        Fs.rmSync(journal)
        yield* Effect.scoped(Effect.gen(function*() {
          const sql = yield* open
          expect(yield* sql<{ integrity_check: string }>`PRAGMA integrity_check`).toEqual([{ integrity_check: "ok" }])
          expect(yield* sql`SELECT id FROM env WHERE value = ${`q${token}`}`).toEqual([{ id: 100 }])
        }))
      }).pipe(Effect.orDie)
    ))

  it.live("removes the files it is told to discard, with their claimed parents once empty", () =>
    withDir((dir) =>
      Effect.gen(function*() {
        // `projects/p/<id>.jsonl` and `projects/p/<id>/tool.txt` are the run's own; `projects/p/`
        // and `other/` are not, nor is the file of another session.
        const id = "0123abcd"
        const project = NodePath.join(dir, "projects", "p")
        Fs.mkdirSync(NodePath.join(project, id, "deep"), { recursive: true })
        const own = [
          NodePath.join(project, `${id}.jsonl`),
          NodePath.join(project, id, "tool.txt"),
          NodePath.join(project, id, "deep", "more.txt")
        ]
        const other = NodePath.join(project, "ffff0000.jsonl")
        const log = NodePath.join(dir, "other", "log.txt")
        Fs.mkdirSync(NodePath.dirname(log))
        for (const file of [...own, other, log]) Fs.writeFileSync(file, `{"token":"${token}"}`)
        const claims = (path: string) => path.slice(project.length + 1).startsWith(id)
        const changed = yield* ScrubFiles.scrub({ roots: [dir], since: 0, skip: new Set(), redact, discard: claims })
        expect([...changed].sort()).toEqual([log, other].sort())
        for (const file of own) expect(Fs.existsSync(file)).toBe(false)
        expect(Fs.existsSync(NodePath.join(project, id))).toBe(false)
        expect(Fs.readdirSync(project)).toEqual(["ffff0000.jsonl"])
        expect(Fs.readFileSync(other, "latin1")).toBe(`{"token":"${marker}"}`)
      })
    ))
})
