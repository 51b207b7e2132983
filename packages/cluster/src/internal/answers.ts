/**
 * The answer (`Result`) of each thread's last committed turn, so that a delivery of a turn that
 * another delivery already committed answers what that one answered instead of failing. Two
 * deliveries of one turn happen when a runner's shard locks lapse (it stalled) while it still runs
 * the turn, or when a runner dies between its commit and its reply.
 *
 * The answer is saved in the commit's own uninterruptible step (`Thread.Options.onCommit`), while
 * the turn still holds the thread's lease, so whoever takes the lease next finds it (unless the
 * runner process died between the two writes). It lives in the SQL
 * database of the runner's context when there is one (the fleet's), else in memory. One row per
 * thread: only the last committed turn can be delivered again (`TurnAlreadyCommitted`).
 *
 * @internal
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { Result } from "@tether/core/Result"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { entityIdOf } from "./entityId.js"

/** @internal */
export interface Answers {
  readonly save: (key: string, turn: string, result: Result) => Effect.Effect<void>
  readonly find: (key: string, turn: string) => Effect.Effect<Option.Option<Result>>
}

const ResultJson = Schema.parseJson(Result)
const encode = Schema.encode(ResultJson)
const decode = Schema.decodeUnknown(ResultJson)

const migrations = Migrator.fromRecord({
  "1_tether_turn_answers": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE IF NOT EXISTS tether_turn_answers (
      entity_id TEXT PRIMARY KEY,
      turn_id TEXT NOT NULL,
      answer TEXT NOT NULL
    )`
  })
})

/**
 * The `turn_id` column's form of a turn id: its JSON text. An id is any string, and the thread
 * store keeps it exactly, but PostgreSQL's TEXT refuses a NUL and UTF-8 cannot hold a lone
 * surrogate; JSON escapes both, and two ids never share a form.
 */
const turnColumn = (turn: string): string => JSON.stringify(turn)

const inMemory = Effect.sync((): Answers => {
  const answers = new Map<string, { readonly turn: string; readonly result: Result }>()
  return {
    save: (key, turn, result) => Effect.sync(() => void answers.set(key, { turn, result })),
    find: (key, turn) =>
      Effect.sync(() => {
        const found = answers.get(key)
        return found?.turn === turn ? Option.some(found.result) : Option.none()
      })
  }
})

const inSql = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    yield* Migrator.make({})({ loader: migrations, table: "tether_cluster_migrations" }).pipe(
      // Runners starting together on an empty PostgreSQL database race to create the table.
      Effect.retry({ times: 3 }),
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.orDie
    )
    return {
      save: (key, turn, result) =>
        Effect.flatMap(encode(result), (answer) =>
          sql`INSERT INTO tether_turn_answers (entity_id, turn_id, answer) VALUES (${entityIdOf(key)}, ${
            turnColumn(turn)
          }, ${answer})
            ON CONFLICT (entity_id) DO UPDATE SET turn_id = excluded.turn_id, answer = excluded.answer`).pipe(
            Effect.asVoid,
            // A lost answer only matters if this turn is delivered again: it then fails with
            // TurnAlreadyCommitted instead of answering.
            Effect.catchAll((error) =>
              Effect.logWarning("saving a turn's answer failed", error)
            )
          ),
      find: (key, turn) =>
        sql<{ readonly answer: string }>`SELECT answer FROM tether_turn_answers
          WHERE entity_id = ${entityIdOf(key)} AND turn_id = ${turnColumn(turn)}`.pipe(
          Effect.flatMap((rows) => rows[0] === undefined ? Effect.succeedNone : Effect.asSome(decode(rows[0].answer))),
          Effect.catchAll((error) =>
            Effect.as(Effect.logWarning("reading a turn's answer failed", error), Option.none())
          )
        )
    } satisfies Answers
  })

/** @internal */
export const make: Effect.Effect<Answers> = Effect.flatMap(
  Effect.serviceOption(SqlClient.SqlClient),
  Option.match({ onNone: () => inMemory, onSome: inSql })
)
