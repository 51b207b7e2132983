/**
 * `Runner.layerSingle` promises "a restarted process runs the turns left pending" (Runner.ts;
 * docs/fleets.md: "its turns are stored in the file before they run"). A process stopped
 * gracefully (its scope closed: SIGTERM, a deploy) while a turn runs: the restarted process on
 * the same SQLite file runs that turn and commits it once.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { describe, expect, it } from "@effect/vitest"
import { Runner, ThreadEntity } from "@tether/cluster"
import { ThreadStore } from "@tether/core"
import * as SqlThreadStore from "@tether/core/SqlThreadStore"
import { Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Path from "node:path"
import * as Fixture from "./fixtures/agent.js"
import { sandbox } from "./fixtures/withRunner.js"

const timing = { entityTerminationTimeout: "1 second", entityMessagePollInterval: "500 millis" } as const

describe("Runner.layerSingle: a process stopped mid-turn", () => {
  it.live("the restarted process runs the pending turn and commits it once", () =>
    Effect.gen(function*() {
      const dirs = yield* sandbox
      const filename = Path.join(dirs.base, "fleet.db")
      const live = ThreadEntity.layer({ agent: Fixture.agentOptions(dirs, "2 seconds") }).pipe(
        Layer.provideMerge(Runner.layerSingle({ timing })),
        Layer.provideMerge(SqlThreadStore.layer),
        Layer.provide(Fixture.toolsLive("single")),
        Layer.provide(Harness.layer),
        Layer.provideMerge(SqliteClient.layer({ filename }))
      )

      // First process: the turn starts, then the process stops while its CLI runs.
      const first = yield* Scope.make()
      const context = yield* Layer.buildWithScope(live, first)
      const threads = yield* ThreadEntity.client().pipe(Effect.provide(context))
      const call = yield* Effect.fork(
        Effect.exit(threads.thread("k").run({ input: Fixture.turn("pending", 4_000), id: "t1" }))
      )
      const until = Date.now() + 20_000
      while (Fixture.processesMentioning(dirs.base).length === 0 && Date.now() < until) {
        yield* Effect.sleep("50 millis")
      }
      expect(Fixture.processesMentioning(dirs.base).length).toBeGreaterThan(0)
      yield* Effect.sleep("300 millis")
      yield* Scope.close(first, Exit.void)
      yield* Effect.exit(call.await)

      // Second process on the same file: the pending turn is run and committed.
      const committed = yield* Effect.gen(function*() {
        const store = yield* ThreadStore.ThreadStore
        const deadline = Date.now() + 25_000
        while (Date.now() < deadline) {
          const record = yield* Effect.orDie(store.get("k"))
          if (Option.isSome(record)) return record
          yield* Effect.sleep("200 millis")
        }
        return Option.none()
      }).pipe(Effect.provide(live), Effect.scoped)
      expect(Option.map(committed, (record) => record.turn)).toEqual(Option.some("t1"))
    }).pipe(Effect.scoped), 90_000)
})
