/**
 * `prune` on PostgreSQL while another host commits over the same key: every superseded record is
 * either still in the history or returned by a prune (which promises to return what it removes,
 * so that their provider sessions are dropped too). Its SELECT and DELETE were two statements
 * under READ COMMITTED: a history row committed between them was removed and never returned.
 */
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { ThreadStore } from "@tether/core"
import * as SqlThreadStore from "@tether/core/SqlThreadStore"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Postgres from "./fixtures/postgres.js"

const host = (url: string) =>
  Effect.map(
    Layer.build(
      SqlThreadStore.layer.pipe(
        Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })),
        Layer.orDie
      )
    ),
    (context) => Context.get(context, ThreadStore.ThreadStore)
  )

describe("ThreadStore (postgres): prune while another host commits", () => {
  it.live("every superseded record is either still in the history or returned by a prune", () =>
    Effect.gen(function*() {
      const { url } = yield* Postgres.schema
      const writer = yield* host(url)
      const pruner = yield* host(url)
      const commits = 200
      const lease = yield* writer.acquire("k", "10 minutes")
      let done = false
      const returned: Array<string> = []
      const pruning = Effect.gen(function*() {
        while (!done) {
          const removed = yield* pruner.prune({ key: "k" })
          for (const entry of removed) returned.push(entry.record.session)
        }
      })
      const writing = Effect.gen(function*() {
        for (let i = 0; i < commits; i++) {
          // A new conversation each time: the previous record goes to the history.
          yield* writer.commit(
            lease,
            new ThreadStore.ThreadRecord({
              key: "k",
              provider: "reference",
              session: `s${i}`,
              fingerprint: "fp",
              turns: 1,
              updatedAt: 1_000 + i
            }),
            "upsert"
          )
        }
        done = true
      })
      yield* Effect.all([writing, pruning], { concurrency: "unbounded" })
      const left = (yield* writer.history("k")).map((entry) => entry.record.session)
      // s0 … s(n-2) were superseded; s(n-1) is current.
      const superseded = Array.from({ length: commits - 1 }, (_, i) => `s${i}`)
      const accounted = new Set([...returned, ...left])
      const lost = superseded.filter((session) => !accounted.has(session))
      expect(lost).toEqual([])
    }).pipe(Effect.scoped))
})
