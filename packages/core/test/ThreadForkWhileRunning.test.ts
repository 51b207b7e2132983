/**
 * A fork's first turn while a turn of its source runs, in one agent (one clone). It loaded the
 * source's committed session over the file the source's running CLI appended to: the source then
 * committed two turns over a transcript that had lost the start of the second (nothing reported).
 * The fork's first turn holds the source's lease too: `ThreadBusy` while the source runs; once the
 * source's turn ended it forks, and the source's session holds its whole second turn.
 */
import { describe, expect, it } from "@effect/vitest"
import { ThreadStore } from "@tether/core"
import { FakeCli } from "@tether/testing"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { sessionsOf, storedTranscript } from "./fixtures/threads.js"
import { record, text, withThreads } from "./fixtures/threadTest.js"

describe("fork while the source thread runs a turn", () => {
  it.live("the fork's first turn is ThreadBusy while the source runs, reverts nothing of it, and forks after", () =>
    withThreads(() => ThreadStore.layerMemory, ({ agent, sandbox }) =>
      Effect.gen(function*() {
        const source = yield* agent.thread("src")
        yield* source.run(text("first turn"))
        // The source's second turn writes part of its transcript, then works on.
        const partA = yield* Deferred.make<void>()
        const running = yield* source.stream(
          FakeCli.script({ op: "text", text: "part-A" }, { op: "sleep", ms: 1_500 }, { op: "text", text: "part-B" })
        ).pipe(
          Stream.tap((event) =>
            event._tag === "TextDelta" && event.text.includes("part-A")
              ? Deferred.succeed(partA, undefined)
              : Effect.void
          ),
          Stream.runDrain,
          Effect.fork
        )
        yield* Deferred.await(partA)
        // Meanwhile the host branches the thread's committed checkpoint: its first turn would load
        // that checkpoint over the session the source's running turn writes (one clone).
        const branch = yield* source.fork("copy")
        const busy = yield* Effect.either(branch.run(text("branch turn")))
        expect(busy._tag === "Left" ? busy.left : busy.right.thread).toMatchObject({ _tag: "ThreadBusy", key: "src" })
        yield* Fiber.join(running)
        const forked = yield* branch.run(text("branch turn"))
        expect(forked.thread).toMatchObject({ mode: "forked", fromTurns: 1 })
        const committed = yield* record(source)
        expect(committed.turns).toBe(2)
        // The source's committed session holds its whole second turn.
        const saved = storedTranscript(sessionsOf(sandbox), committed.session)
        expect(saved).toContain("part-B")
        expect(saved).toContain("part-A")
      })))
})
