/**
 * The runner's answers store (the saved `Result` a redelivered, already committed turn answers
 * with) keeps any turn id and key, as the thread store does (docs/threads.md: a turn id is any
 * string), also those PostgreSQL's TEXT cannot hold as written (a NUL): docs/fleets.md, a turn
 * delivered twice answers the first delivery's result.
 */
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Runner, ThreadEntity } from "@tether/cluster"
import { Raw, Result } from "@tether/core/Result"
import * as SqlThreadStore from "@tether/core/SqlThreadStore"
import { Harness } from "@tether/testing"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Answers from "../src/internal/answers.js"
import * as Fixture from "./fixtures/agent.js"
import { database } from "./fixtures/postgres.js"
import { sandbox } from "./fixtures/withRunner.js"

const result = new Result({
  runId: "r1",
  provider: "reference",
  text: "the answer",
  transcript: [],
  raw: new Raw({ stdout: "", stderr: "", stdoutBytes: 0, stderrBytes: 0 }),
  effectiveTools: [],
  instructions: ""
})

describe("the runner's answers store keeps any turn id", () => {
  it.live(
    "on PostgreSQL: quotes, non-ASCII, 1 KB and a NUL in a turn id or a key keep the answer",
    () =>
      Effect.gen(function*() {
        const { url } = yield* database
        const client = Context.get(
          yield* Layer.build(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })),
          PgClient.PgClient
        )
        const answers = yield* Answers.make.pipe(Effect.provideService(SqlClient.SqlClient, client))
        for (const turn of ["plain", "quote'\"\\", "ünï😀", "x".repeat(1024), "nul\u0000id"]) {
          yield* answers.save("thread-'\"ü", turn, result)
          const found = yield* answers.find("thread-'\"ü", turn)
          expect({ turn: turn.slice(0, 20), text: Option.map(found, (r) => r.text) }).toEqual({
            turn: turn.slice(0, 20),
            text: Option.some("the answer")
          })
        }
      }).pipe(Effect.scoped),
    30_000
  )

  it.live(
    "a fleet on PostgreSQL: the same turn again, its id holding a NUL, answers the first delivery's result",
    () =>
      Effect.gen(function*() {
        const dirs = yield* sandbox
        const { url } = yield* database
        const id = "turn\u0000one"
        yield* Effect.gen(function*() {
          const threads = yield* ThreadEntity.client({ timeout: "10 seconds", turnTimeout: "30 seconds" })
          const first = yield* threads.thread("k").run({ input: Fixture.turn("one"), id })
          // docs/fleets.md: "`run` with the turn's `id` then answers its result."
          const again = yield* Effect.either(threads.thread("k").run({ input: Fixture.turn("one"), id }))
          expect(again._tag === "Right" ? again.right.text : again.left._tag).toEqual(first.text)
        }).pipe(
          Effect.provide(
            ThreadEntity.layer({ agent: Fixture.agentOptions(dirs, "3 seconds") }).pipe(
              Layer.provideMerge(Runner.layerSingle()),
              Layer.provideMerge(SqlThreadStore.layer),
              Layer.provide(Fixture.toolsLive("single")),
              Layer.provide(Harness.layer),
              Layer.provideMerge(PgClient.layer({ url: Redacted.make(url) }))
            )
          ),
          Effect.scoped
        )
        expect(Fixture.processesMentioning(dirs.base)).toEqual([])
      }).pipe(Effect.scoped),
    60_000
  )
})
