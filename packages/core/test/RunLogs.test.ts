/**
 * The per-process logs a CLI writes into the agent's clone (`ProfileLayout.logs`), with the fake
 * CLI (a real process that writes `$HOME/.cache/fake-cli/<start time>-<pid>.log` from its start to
 * its end, as Claude Code writes its MCP log): they leave the clone once no process of the agent
 * runs, and never while one might still be writing.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { FakeCli, Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import * as Fs from "node:fs"
import * as NodePath from "node:path"

const names = (dir: string): ReadonlyArray<string> => Fs.existsSync(dir) ? Fs.readdirSync(dir).sort() : []

/** An agent on the fake CLI, and its clone's log directory. */
const fakeAgent = Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  const agent = yield* Agent.make({
    driver: FakeCli.driver(),
    definition: { instructions: "", skills: [], tools: Toolkit.empty },
    workspace: sandbox.workspace,
    profile: sandbox.selection
  })
  const clones = yield* Harness.entries(sandbox.root)
  expect(clones).toHaveLength(1)
  return { agent, logs: NodePath.join(sandbox.root, clones[0]!, "home", ".cache", "fake-cli") }
})

/** Polls `dir` until it holds `count` files (10 s at most), and returns them. */
const settle = (dir: string, count: number) =>
  Effect.sync(() => names(dir)).pipe(
    Effect.repeat({
      until: (files) => files.length === count,
      schedule: Schedule.spaced("20 millis").pipe(Schedule.upTo("10 seconds"))
    }),
    Effect.zipRight(Effect.sync(() => names(dir)))
  )

describe("a process's own logs in the clone", () => {
  it.live("each run's log leaves the clone once its process is gone", () =>
    Effect.gen(function*() {
      const { agent, logs } = yield* fakeAgent
      const input = FakeCli.script({ op: "text", text: "ok" })
      for (let i = 0; i < 3; i++) {
        yield* agent.run(input)
        // The reaper runs behind the result: the log goes once the process is gone.
        expect(yield* settle(logs, 0)).toEqual([])
      }
      // The directory stays for the next process.
      expect(Fs.statSync(logs).isDirectory()).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)))

  it.live("no log goes while another process of the agent runs; all go when the last one does", () =>
    Effect.gen(function*() {
      const { agent, logs } = yield* fakeAgent
      // The first run's result comes at once; its process lingers, still writing its log.
      const lingering = yield* Effect.fork(
        agent.run(FakeCli.script({ op: "text", text: "first" }, { op: "linger", ms: 1500 }))
      )
      yield* Fiber.join(lingering)
      yield* agent.run(FakeCli.script({ op: "text", text: "second" }))
      // The second process is gone and scrubbed; the first one still runs: both logs stay.
      yield* Effect.sleep("400 millis")
      const both = names(logs)
      expect(both).toHaveLength(2)
      // The first process ends: its reaper finds no process left and both logs go.
      expect(yield* settle(logs, 0)).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)))

  it.live("a thread's warm process counts too: a log stays while it runs", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      // The reference live CLI writes no log: the test writes one in the logs' directory while
      // the agent's processes run, as a CLI would, and the scrubs of the processes find it.
      const base = Reference.driver({ live: true })
      const agent = yield* Agent.make({
        driver: { ...base, layout: { ...base.layout, siblings: ["home"], logs: { home: ["logs/**"] } } },
        definition: { instructions: "", skills: [], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      const clones = yield* Harness.entries(sandbox.root)
      const dir = NodePath.join(sandbox.root, clones[0]!, "home", "logs")
      const first = yield* agent.thread("first")
      const second = yield* agent.thread("second")
      yield* first.run("hello")
      yield* second.run("hello")
      yield* Effect.sync(() => {
        Fs.mkdirSync(dir)
        Fs.writeFileSync(NodePath.join(dir, "process.log"), "a line\n")
      })
      // The second thread's process goes; its scrub finds the log, but the first one's still runs.
      yield* second.close
      yield* Effect.sleep("200 millis")
      expect(names(dir)).toEqual(["process.log"])
      // The last process goes: the log goes with it.
      yield* first.close
      expect(yield* settle(dir, 0)).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)))
})
