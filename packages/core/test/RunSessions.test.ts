/**
 * What a run leaves of its provider session in the agent's clone, with the fake CLI (a real
 * process that keeps one transcript per session, `sessions/<id>.jsonl`, as the real CLIs do).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as NodePath from "node:path"

const transcripts = (dir: string): ReadonlyArray<string> => Fs.existsSync(dir) ? Fs.readdirSync(dir).sort() : []

/** An agent on the fake CLI (resume on), and its clone's transcript directory. */
const fakeAgent = Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  const agent = yield* Agent.make({
    driver: FakeCli.driver({ capabilities: { resume: true } }),
    definition: { instructions: "", skills: [], tools: Toolkit.empty },
    workspace: sandbox.workspace,
    profile: sandbox.selection
  })
  const clones = yield* Harness.entries(sandbox.root)
  expect(clones).toHaveLength(1)
  return { agent, sessions: NodePath.join(sandbox.root, clones[0]!, "profile", "sessions") }
})

describe("a run's session in the clone", () => {
  it.live("a plain run's transcript is removed once its process is gone; a thread turn's stays", () =>
    Effect.gen(function*() {
      const { agent, sessions } = yield* fakeAgent
      const input = FakeCli.script({ op: "text", text: "ok" })
      const plain: Array<string> = []
      for (let i = 0; i < 3; i++) plain.push((yield* agent.run(input)).session!)
      expect(new Set(plain).size).toBe(3)
      const thread = yield* agent.thread("kept")
      const first = yield* thread.run(input)
      const second = yield* thread.run(input)
      expect(second.session).toBe(first.session)
      // The plain runs' reapers run behind their results: their files go once each process is gone.
      yield* Effect.sync(() => transcripts(sessions)).pipe(
        Effect.repeat({
          until: (names) => names.length === 1,
          schedule: Schedule.spaced("20 millis").pipe(Schedule.upTo("10 seconds"))
        })
      )
      expect(transcripts(sessions)).toEqual([`${first.session}.jsonl`])
      // The thread still resumes its own transcript.
      expect((yield* thread.run(input)).session).toBe(first.session)
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)))

  it.live("runAs keeps an attempt's transcript for its repair turn, and removes it once none follows", () =>
    Effect.gen(function*() {
      const { agent, sessions } = yield* fakeAgent
      // No JSON in the answer: a repair turn resumes the attempt's session (the fake CLI fails a
      // resume whose transcript is gone), and its answer does not decode either.
      const error = yield* Effect.flip(
        agent.runAs(Schema.Struct({ n: Schema.Number }), FakeCli.script({ op: "text", text: "no value" }), {
          repairs: 1
        })
      )
      expect(error._tag).toBe("StructuredOutputError")
      if (error._tag !== "StructuredOutputError") return
      expect(error.attempts).toBe(2)
      expect(error.result.session).toBeDefined()
      yield* Effect.sync(() => transcripts(sessions)).pipe(
        Effect.repeat({
          until: (names) => names.length === 0,
          schedule: Schedule.spaced("20 millis").pipe(Schedule.upTo("10 seconds"))
        })
      )
      expect(transcripts(sessions)).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)))
})
