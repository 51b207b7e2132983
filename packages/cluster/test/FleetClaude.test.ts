/**
 * The fleet with the real Claude Code CLI (pinned in node_modules) on two runner processes, offline:
 * the scripted Anthropic server in this process is the model. A thread's runner is SIGKILLed while
 * its CLI waits for the model; the turn is delivered again to the other runner, whose CLI resumes
 * the thread's committed Claude session (saved by the dead runner in the shared session store).
 */
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { Runner, ThreadEntity } from "@tether/cluster"
import { AnthropicServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Fixture from "./fixtures/agent.js"
import { startRunner } from "./fixtures/fleet.js"
import * as Postgres from "./fixtures/postgres.js"

const sandbox = Effect.acquireRelease(
  Effect.sync(Fixture.makeDirs),
  (dirs) => Effect.sync(() => Fixture.removeDirs(dirs))
)

const lastUser = (request: AnthropicServer.MessagesRequest) =>
  AnthropicServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""

describe("a fleet running the real Claude Code CLI", () => {
  it.live(
    "a runner SIGKILLed while Claude waits for the model: the turn resumes the thread's Claude session on the other runner",
    () =>
      Effect.gen(function*() {
        const dirs = yield* sandbox
        const db = yield* Postgres.database
        let slow = 0
        // Every turn asks the runner who it is (a host tool on its gateway), then answers with it.
        // The first delivery of the "slowly" turn gets no answer before its runner is killed.
        const server = yield* AnthropicServer.make({
          respond: AnthropicServer.roundTrip(
            (request) => {
              const ask = AnthropicServer.callTool("whoami", {})
              return lastUser(request).includes("slowly") && slow++ === 0 ? AnthropicServer.delayed(60_000, ask) : ask
            },
            (results) => AnthropicServer.reply(`served by ${JSON.parse(results[0]!.text).runner}`)
          )
        })
        const runners = yield* Effect.all(
          ["c1", "c2"].map((name) =>
            startRunner({
              name,
              databaseUrl: db.url,
              dirs,
              timing: "tuned",
              leaseTtl: "5 seconds",
              reapInterval: "1 second",
              claude: { url: server.url }
            })
          ),
          { concurrency: "unbounded" }
        )
        yield* Effect.gen(function*() {
          const threads = yield* ThreadEntity.client({ turnTimeout: "3 minutes" })
          const thread = threads.thread("tenant-42/claude")
          const first = yield* thread.run({ input: "Who runs this thread?", id: "c#1" })
          const owner = /served by (c[12])/.exec(first.text)?.[1]
          expect(owner).toBeDefined()
          const victim = runners.find((runner) => runner.name === owner)!

          const second = yield* Effect.fork(thread.run({ input: "Keep going slowly.", id: "c#2" }))
          // Killed once its Claude CLI has sent the turn to the model.
          while (!(yield* server.messages).some((request) => lastUser(request).includes("slowly"))) {
            yield* Effect.sleep("50 millis")
          }
          process.kill(victim.pid, "SIGKILL")
          const result = yield* Fiber.join(second)
          expect(result.text).toBe(`served by ${runners.find((runner) => runner !== victim)!.name}`)
          // The other runner's CLI resumed the committed session: the model saw the first turn.
          const resumed = (yield* server.messages).filter((request) => lastUser(request).includes("slowly")).at(-1)!
          const history = AnthropicServer.transcript(resumed).map(([, text]) => text).join("\n")
          expect(history).toContain("Who runs this thread?")
          expect(history).toContain(`served by ${victim.name}`)
          expect(result.session).toBe(first.session)
          // The dead runner's Claude CLI, still waiting for the model, is reaped by the survivor.
          while (Fixture.processesMentioning(`TETHER_AGENT_MARKER=${victim.pid}-`).length > 0) {
            yield* Effect.sleep("100 millis")
          }
          expect(Option.getOrThrow(yield* thread.snapshot)).toMatchObject({
            provider: "claude",
            session: first.session,
            turns: 2,
            turn: "c#2"
          })
        }).pipe(
          Effect.provide(
            Runner.layerClient({ timing: Runner.tuned }).pipe(
              Layer.provideMerge(PgClient.layer({ url: Redacted.make(db.url), maxConnections: 4 }).pipe(Layer.orDie))
            )
          ),
          Effect.tapErrorCause(() =>
            Effect.sync(() => runners.forEach((runner) => console.log(`--- ${runner.name}:\n${runner.output()}`)))
          )
        )
      }).pipe(Effect.scoped),
    180_000
  )
})
