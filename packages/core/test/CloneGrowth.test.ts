/**
 * A long-running host: what a long-lived agent's clone keeps of turns that never commit.
 * docs/profiles.md promises that "a long-lived agent's clone does not grow with its plain runs (an
 * agent's `runAs` keeps an attempt's entries while a repair turn may resume them, and removes them
 * once none follows)". The fake CLI is a real process that keeps one transcript per session in the
 * clone (`sessions/<id>.jsonl`), as the real CLIs do.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, type Driver } from "@tether/core"
import { FakeCli, Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as NodeUrl from "node:url"

const transcripts = (dir: string): ReadonlyArray<string> => Fs.existsSync(dir) ? Fs.readdirSync(dir).sort() : []

const fakeAgent = agentOf(FakeCli.driver({ capabilities: { resume: true } }))

function agentOf(driver: Driver.Driver, live?: Agent.Options<Toolkit.Any>["live"]) {
  return Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver,
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection,
      processes: { exitGrace: "1 second", killGrace: "1 second" },
      ...(live === undefined ? {} : { live })
    })
    const clones = yield* Harness.entries(sandbox.root)
    expect(clones).toHaveLength(1)
    return { agent, sessions: NodePath.join(sandbox.root, clones[0]!, "profile", "sessions") }
  })
}

/** Waits (bounded) until the clone's transcripts are `expected` in number; returns what is there. */
const settled = (dir: string, expected: number) =>
  Effect.sync(() => transcripts(dir)).pipe(
    Effect.repeat({
      until: (names) => names.length === expected,
      schedule: Schedule.spaced("25 millis").pipe(Schedule.upTo("5 seconds"))
    }),
    Effect.zipRight(Effect.sync(() => transcripts(dir)))
  )

const failing = FakeCli.script({ op: "result", ok: false, error: "overloaded" })
const rounds = 6

/** The transcript of `session` in the clone's `sessions` directory. */
const transcriptOf = (session: string | undefined) => `${session}.jsonl`

// The reference driver's live member, with a clone layout that keeps sessions: its live process
// writes `sessions/<session>.jsonl` when it starts (as a CLI keeps its session's transcript), then
// serves its turns. A prompt "fail" ends its turn with a provider failure; the process stays warm.
const liveScript = [
  "const fs = require(\"node:fs\"); const path = require(\"node:path\");",
  "const dir = path.join(process.env.REFERENCE_HOME, \"sessions\");",
  "fs.mkdirSync(dir, { recursive: true });",
  "fs.appendFileSync(path.join(dir, process.env.REFERENCE_SESSION + \".jsonl\"), \"{}\\n\");",
  "import(process.argv[1]);"
].join(" ")
const liveDriver = (): Driver.Driver => {
  const base = Reference.driver({
    live: true,
    respond: (prompt) =>
      prompt === "fail"
        ? [{
          _tag: "Terminal",
          ok: false,
          text: undefined,
          usage: undefined,
          model: undefined,
          session: undefined,
          error: "overloaded",
          raw: {}
        }]
        : Reference.answer(prompt)
  })
  const live = base.live!
  return {
    ...base,
    layout: {
      ...base.layout,
      classes: { ...base.layout.classes, sessions: ["sessions/**"] },
      sessionOf: (path) => /^sessions\/([0-9a-f-]{36})\.jsonl$/.exec(path)?.[1]
    },
    live: {
      ...live,
      open: (request) =>
        Effect.map(live.open(request), (invocation) => ({
          ...invocation,
          args: ["-e", liveScript, NodeUrl.pathToFileURL(Reference.liveProgramPath).href]
        }))
    }
  }
}

describe("a long-lived agent's clone and turns that never commit", () => {
  it.live("plain runs that fail leave nothing (control)", () =>
    Effect.gen(function*() {
      const { agent, sessions } = yield* fakeAgent
      for (let i = 0; i < rounds; i++) {
        const error = yield* Effect.flip(agent.run(failing))
        expect(error._tag).toBe("RunError")
      }
      expect(yield* settled(sessions, 0)).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)), 60_000)

  it.live(
    "runAs attempts that fail (provider error) or are canceled leave no transcript in the clone",
    () =>
      Effect.gen(function*() {
        const { agent, sessions } = yield* fakeAgent
        const schema = Schema.Struct({ n: Schema.Number })
        for (let i = 0; i < rounds; i++) {
          // No repair turn can follow a provider failure: the attempt's entries have no further use.
          const error = yield* Effect.flip(agent.runAs(schema, failing, { repairs: 1 }))
          expect(error._tag).toBe("RunError")
        }
        // Canceled through the turn's `cancel`: no repair turn follows either.
        for (let i = 0; i < 2; i++) {
          const cancel = yield* Deferred.make<void>()
          const attempt = yield* Effect.fork(
            Effect.flip(agent.runAs(schema, {
              input: FakeCli.script({ op: "text", text: "working" }, { op: "sleep", ms: 10_000 }),
              cancel: Deferred.await(cancel)
            }))
          )
          yield* Effect.sleep("600 millis")
          yield* Deferred.succeed(cancel, undefined)
          yield* attempt.await
        }
        const left = yield* settled(sessions, 0)
        // Every failed or canceled attempt's transcript stays in the clone for the agent's lifetime.
        expect(left).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "thread turns that fail on a fresh session leave no transcript (none that delete or prune could find)",
    () =>
      Effect.gen(function*() {
        const { agent, sessions } = yield* fakeAgent
        const thread = yield* agent.thread("flaky")
        for (let i = 0; i < rounds; i++) {
          const error = yield* Effect.flip(thread.run(failing))
          expect(error._tag).toBe("RunError")
        }
        // Nothing was committed: the thread has no record, and no session of its is the store's.
        expect((yield* thread.snapshot)._tag).toBe("None")
        // Every way the API offers to drop a thread's sessions.
        yield* thread.delete
        yield* thread.prune({ olderThan: 0 })
        yield* agent.pruneThreads({ olderThan: 0 })
        yield* thread.close
        const left = yield* settled(sessions, 0)
        expect(left).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "a fork's first turn that fails leaves its own transcript out, never the source's",
    () =>
      Effect.gen(function*() {
        const { agent, sessions } = yield* agentOf(FakeCli.driver({ capabilities: { resume: true, fork: true } }))
        const source = yield* agent.thread("source")
        const committed = yield* source.run(FakeCli.script({ op: "text", text: "one" }))
        const copy = yield* source.fork("copy")
        for (let i = 0; i < 3; i++) {
          const error = yield* Effect.flip(copy.run(failing))
          expect(error._tag).toBe("RunError")
        }
        // The source's session (which every failed fork turn loaded and copied) stays.
        expect(yield* settled(sessions, 1)).toEqual([transcriptOf(committed.session)])
        // The source resumes it; the fork, tried again, forks it.
        const again = yield* source.run(FakeCli.script({ op: "text", text: "two" }))
        expect(again.thread?.mode).toBe("resumed")
        expect(again.session).toBe(committed.session)
        const branch = yield* copy.run(FakeCli.script({ op: "text", text: "branch" }))
        expect(branch.thread?.mode).toBe("forked")
        expect(yield* settled(sessions, 2)).toEqual(
          [transcriptOf(committed.session), transcriptOf(branch.session)].sort()
        )
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "a resumed turn that fails keeps the checkpoint's session, which the next turn resumes",
    () =>
      Effect.gen(function*() {
        const { agent, sessions } = yield* fakeAgent
        const thread = yield* agent.thread("kept")
        const committed = yield* thread.run(FakeCli.script({ op: "text", text: "one" }))
        for (let i = 0; i < 3; i++) {
          const error = yield* Effect.flip(thread.run(failing))
          expect(error._tag).toBe("RunError")
        }
        expect(yield* settled(sessions, 1)).toEqual([transcriptOf(committed.session)])
        const again = yield* thread.run(FakeCli.script({ op: "text", text: "two" }))
        expect(again.thread?.mode).toBe("resumed")
        expect(again.session).toBe(committed.session)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "runAs left by its caller (interrupted, or its stream left after an attempt's end) leaves no transcript",
    () =>
      Effect.gen(function*() {
        const { agent, sessions } = yield* fakeAgent
        const schema = Schema.Struct({ n: Schema.Number })
        // Interrupted mid-attempt (a timeout around the call).
        const timedOut = yield* agent.runAs(schema, FakeCli.script({ op: "sleep", ms: 10_000 })).pipe(
          Effect.timeout("600 millis"),
          Effect.either
        )
        expect(timedOut._tag).toBe("Left")
        // Left once the attempt's run finished, before its answer was judged (a repair may have followed).
        yield* agent.streamAs(schema, FakeCli.script({ op: "text", text: "no json here" })).pipe(
          Stream.takeUntil((item) => item._tag === "RunFinished"),
          Stream.runDrain
        )
        expect(yield* settled(sessions, 0)).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "a live thread's process on a fresh session that committed nothing leaves no transcript once shut down",
    () =>
      Effect.gen(function*() {
        const { agent, sessions } = yield* agentOf(liveDriver(), { idleTimeout: "200 millis" })
        const flaky = yield* agent.thread("flaky")
        for (let i = 0; i < 3; i++) {
          // Each turn fails on its fresh session; its process stays warm until the next turn (which
          // starts another fresh session) or the idle timeout shuts it down.
          const error = yield* Effect.flip(flaky.run("fail"))
          expect(error._tag).toBe("RunError")
        }
        const kept = yield* agent.thread("kept")
        const committed = yield* kept.run("hello")
        const error = yield* Effect.flip(kept.run("fail"))
        expect(error._tag).toBe("RunError")
        // Past the idle timeout every process is down: the committed session alone stays.
        expect(yield* settled(sessions, 1)).toEqual([transcriptOf(committed.session)])
        const again = yield* kept.run("again")
        expect(again.thread?.mode).toBe("resumed")
        expect(again.session).toBe(committed.session)
        yield* flaky.close
        yield* kept.close
        expect(yield* settled(sessions, 1)).toEqual([transcriptOf(committed.session)])
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )
})
