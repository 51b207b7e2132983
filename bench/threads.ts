/**
 * P10 — what committing a thread's checkpoint after its session is saved costs per turn, with the
 * real CLIs offline (scripted model servers). A thread turn's result waits for the CLI to exit
 * (it may still write its session after its terminal record), saves the session into the store,
 * then commits; a plain run's result does not wait. Both are measured on one agent, interleaved:
 * - the tail: from the event before `RunFinished` (the batch of the terminal record) to
 *   `RunFinished`, by the events' own timestamps; the baseline is the plain run's tail;
 * - the whole turn, wall clock, for scale.
 * The difference of the tails is the per-turn price of "commit only after the session is saved".
 *
 * Run: node --import tsx --import ./bench/compiled.mjs bench/threads.ts [turns=5]
 */
import { Agent, type Event } from "@tether/core"
import { AnthropicServer, Harness, ResponsesServer } from "@tether/testing"
import * as GeminiServer from "@tether/testing/GeminiServer"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Stream from "effect/Stream"
import * as NodePath from "node:path"
import * as Offline from "./offline.js"

export interface ThreadFigures {
  readonly driver: string
  readonly turns: number
  /** Median ms from the terminal record's batch to `RunFinished`. */
  readonly plainTailMs: number
  readonly threadTailMs: number
  /** Median wall ms of the whole turn. */
  readonly plainMs: number
  readonly threadMs: number
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/** Wall time of one turn and its tail (see the module documentation). */
const timed = <E>(stream: Stream.Stream<Event.Event, E>) =>
  Effect.gen(function*() {
    const start = performance.now()
    const events = Array.from(yield* Stream.runCollect(stream))
    const finished = events.length - 1
    if (events[finished]?._tag !== "RunFinished" || events[finished].outcome !== "success") {
      return yield* Effect.dieMessage(`the turn failed: ${JSON.stringify(events.at(-1))}`)
    }
    return { wall: performance.now() - start, tail: events[finished].time - events[finished - 1]!.time }
  })

const measureDriver = (name: string, driver: Agent.Options<typeof Toolkit.empty>["driver"], turns: number) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver,
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection,
      // The one-shot turn's tail (its CLI's exit before the commit) is what this measures.
      live: { threads: false }
    })
    const thread = yield* agent.thread("bench")
    yield* timed(agent.stream("warm up"))
    yield* timed(thread.stream("warm up"))
    const plain: Array<{ wall: number; tail: number }> = []
    const threaded: Array<{ wall: number; tail: number }> = []
    for (let i = 0; i < turns; i++) {
      // Alternate which goes first, so a load swing weighs on both alike.
      const a = timed(agent.stream(`question ${i}`)).pipe(Effect.tap((t) => Effect.sync(() => plain.push(t))))
      const b = timed(thread.stream(`question ${i}`)).pipe(Effect.tap((t) => Effect.sync(() => threaded.push(t))))
      yield* i % 2 === 0 ? Effect.zipRight(a, b) : Effect.zipRight(b, a)
    }
    return {
      driver: name,
      turns,
      plainTailMs: median(plain.map((t) => t.tail)),
      threadTailMs: median(threaded.map((t) => t.tail)),
      plainMs: median(plain.map((t) => t.wall)),
      threadMs: median(threaded.map((t) => t.wall))
    } satisfies ThreadFigures
  }).pipe(Effect.scoped)

/**
 * Measures `turns` (default 5) of each kind per CLI, after one warm-up of each; the CLIs one after
 * the other, or side by side with `concurrent` (CI's short smoke run: no verdict is drawn from it).
 */
export const measure = (
  turns = 5,
  options: { readonly concurrent?: boolean } = {}
): Effect.Effect<ReadonlyArray<ThreadFigures>, unknown> =>
  Effect.gen(function*() {
    const anthropic = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("fine") })
    const responses = yield* ResponsesServer.make({ script: () => ResponsesServer.text("fine") })
    const gemini = yield* GeminiServer.make({ respond: () => GeminiServer.reply("fine") })
    return yield* Effect.all([
      measureDriver(
        "claude",
        Offline.claude(anthropic.url),
        turns
      ),
      measureDriver(
        "codex",
        Offline.codex(responses.baseUrl),
        turns
      ),
      measureDriver(
        "gemini",
        Offline.gemini(gemini.url),
        turns
      )
    ], { concurrency: options.concurrent === true ? "unbounded" : 1 })
  }).pipe(
    Effect.scoped,
    Effect.provide(Harness.layer),
    Effect.provide(Logger.replace(Logger.defaultLogger, Logger.none))
  )

/** The lines printed when run directly. */
export const format = (rows: ReadonlyArray<ThreadFigures>): string =>
  rows.map((f) =>
    `${f.driver.padEnd(7)} terminal record → RunFinished: thread turn ${f.threadTailMs.toFixed(0)} ms, plain run ${
      f.plainTailMs.toFixed(0)
    } ms (+${(f.threadTailMs - f.plainTailMs).toFixed(0)} ms per turn); whole turn ${f.threadMs.toFixed(0)} vs ${
      f.plainMs.toFixed(0)
    } ms (${(f.threadMs / f.plainMs).toFixed(2)}×), medians of ${f.turns}`
  ).join("\n")

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(NodePath.basename(process.argv[1]))
if (isMain) {
  Effect.runPromise(measure(Number(process.argv[2] ?? 5))).then((rows) => process.stdout.write(`${format(rows)}\n`))
}
