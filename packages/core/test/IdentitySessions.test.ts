// The session store is keyed by the agent's identity. Two different identities must
// never share one store (a tenant's transcripts would be seeded into another tenant's clones),
// and an agent's retention must never remove a session that a committed checkpoint points at.
import { describe, expect, it } from "@effect/vitest"
import { ThreadStore } from "@tether/core"
import { Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Threads from "./fixtures/threads.js"
import { text, withThreads } from "./fixtures/threadTest.js"

/** Every file under `dir` named `name` (recursive). */
const find = (dir: string, name: string): ReadonlyArray<string> =>
  Fs.existsSync(dir)
    ? (Fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as Array<Fs.Dirent>)
      .filter((entry) => entry.isFile() && entry.name === name)
      .map((entry) => Path.join(entry.parentPath, entry.name))
    : []

describe("identity and the session store", () => {
  it.live("two different identities (tenant 'acme/eu' + id 'alice' vs tenant 'acme' + id 'eu/alice') keep separate session stores", () =>
    withThreads(() => ThreadStore.layerMemory, ({ control, make, sandbox }) =>
      Effect.gen(function*() {
        const sessions = Threads.sessionsOf(sandbox)
        const first = yield* Effect.scoped(Effect.gen(function*() {
          const a = yield* make(Threads.driver(control), { identity: { tenant: "acme/eu", id: "alice" } })
          const result = yield* (yield* a.thread("ka")).run(text("tenant acme/eu's secret"))
          yield* a.close()
          return { fingerprint: a.fingerprint, session: result.session! }
        }))
        const b = yield* make(Threads.driver(control), { identity: { tenant: "acme", id: "eu/alice" } })
        // They are different identities: the fingerprint tells them apart.
        expect(b.fingerprint).not.toBe(first.fingerprint)
        yield* (yield* b.thread("kb")).run(text("tenant acme's turn"))
        // ...so each has a session store of its own,
        expect.soft(Fs.readdirSync(sessions)).toHaveLength(2)
        // ...and the other tenant's transcript is never seeded into b's execution clone.
        expect(find(sandbox.root, `${first.session}.jsonl`)).toEqual([])
      })))

  it.live("an agent's pruneThreads never removes the session another agent's committed checkpoint points at", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const control = Threads.makeControl()
      const dir = Fs.mkdtempSync(Path.join(sandbox.base, "db-"))
      const file = Path.join(dir, "threads.db")
      // Host B keeps its threads in SQLite; it commits one turn and stops.
      const committed = yield* Effect.scoped(Effect.gen(function*() {
        const b = yield* Threads.makeAgent(sandbox, Threads.driver(control))
        return (yield* (yield* b.thread("k")).run(text("remember this"))).session!
      })).pipe(Effect.provide(Threads.sqliteLayer(file)))
      yield* Effect.sleep("50 millis")
      // Another agent of the same profile, with the default store (an in-memory one of its own),
      // prunes its threads.
      yield* Effect.scoped(Effect.gen(function*() {
        const a = yield* Threads.makeAgent(sandbox, Threads.driver(control))
        yield* a.pruneThreads({ olderThan: "10 millis" })
      }))
      // B's checkpoint still points at the session; the session store must still hold it.
      expect.soft(Threads.storedTranscript(Threads.sessionsOf(sandbox), committed)).not.toBe("")
      // Host B restarts and continues its thread.
      const next = yield* Effect.scoped(Effect.gen(function*() {
        const b = yield* Threads.makeAgent(sandbox, Threads.driver(control))
        return yield* (yield* b.thread("k")).run(text("and now?"))
      })).pipe(Effect.provide(Threads.sqliteLayer(file)))
      expect(next.thread?.mode).toBe("resumed")
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(Threads.ToolsLive, Harness.layer))))
})
