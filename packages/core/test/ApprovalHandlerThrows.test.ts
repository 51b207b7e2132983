// docs/approvals.md promises "A handler that dies answers deny" (by `handler`), on a live
// thread too. A handler that throws while building its Effect (a plain bug in the host's code,
// e.g. a field the request does not have) is such a death: the tool executor guards the same case
// with `Effect.suspend`. Here the provider's request must still get a deny from the handler.
import { describe, expect, it } from "@effect/vitest"
import { Approval, Driver, ThreadStore } from "@tether/core"
import { Reference } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Stream from "effect/Stream"
import { withThreads } from "./fixtures/threadTest.js"

/** The reference live driver with `patch` applied to each session it attaches (it asks approvals). */
const patched = (
  base: Driver.Driver,
  patch: (session: Driver.LiveSession, context: Driver.LiveContext) => Driver.LiveSession
): Driver.Driver => ({
  ...base,
  approvals: { live: true },
  live: {
    ...base.live!,
    attach: (channel, context) => Effect.map(base.live!.attach(channel, context), (session) => patch(session, context))
  }
})

describe("the approvals handler", () => {
  it.live("a handler that throws while building its answer denies (by handler); the provider gets the deny", () => {
    const base = Reference.driver({ live: true })
    // The provider asks for a file change before answering the turn (as a CLI's tool call waits).
    const asked: Array<Exit.Exit<Approval.Decision>> = []
    const asking = patched(base, (session, context) => ({
      ...session,
      turn: (request) =>
        request.prompt !== "ask" ? session.turn(request) : Stream.concat(
          Stream.drain(Stream.fromEffect(
            context.approve!({ toolName: "Write", kind: "fileChange", input: { file_path: "a.txt" }, paths: ["a.txt"] })
              .pipe(Effect.exit, Effect.tap((exit) => Effect.sync(() => asked.push(exit))))
          )),
          session.turn(request)
        )
    }))
    // A host bug: only commands were expected, `command` is absent on a file change.
    const handler = (request: Approval.ApprovalRequest) =>
      Effect.succeed(request.command!.startsWith("ls") ? Approval.allow : Approval.deny("not ls"))
    return withThreads(() => ThreadStore.layerMemory, ({ make }) =>
      Effect.gen(function*() {
        const agent = yield* make(asking, { approvals: { handler, deadline: "5 seconds" } })
        const thread = yield* agent.thread("k")
        const events = Array.from(yield* Stream.runCollect(thread.stream("ask")))
        yield* thread.close
        const resolved = events.flatMap((event) => event._tag === "ApprovalResolved" ? [event] : [])
        expect(resolved.map((event) => event.by)).toEqual(["handler"])
        expect(resolved[0]?.decision._tag).toBe("Deny")
        expect(asked).toHaveLength(1)
        const exit = asked[0]!
        expect(Exit.isSuccess(exit) ? exit.value._tag : `not answered: ${String(exit)}`).toBe("Deny")
        expect(events.at(-1)?._tag).toBe("RunFinished")
      }))
  }, 60_000)
})
