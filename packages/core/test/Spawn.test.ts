/**
 * What a run error says when the provider process cannot start or dies before its terminal
 * record: the command, how it was chosen, and the CLI's own last words on stderr.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, AgentError } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"

const Tools = Toolkit.empty
const ToolsLive = Tools.toLayer({})

const runError = (driver: Agent.Options<typeof Tools>["driver"], input: string) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver,
      definition: { instructions: "", skills: [], tools: Tools },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    const error = yield* Effect.flip(agent.run(input))
    expect(error).toBeInstanceOf(AgentError.RunError)
    return error as AgentError.RunError
  }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.layer]))

describe("run errors explain a process that failed", () => {
  it.live("SpawnFailed names the command and how it was chosen", () =>
    Effect.gen(function*() {
      const fake = FakeCli.driver()
      const error = yield* runError({
        ...fake,
        prepare: (request) =>
          Effect.map(fake.prepare(request), (invocation) => ({
            ...invocation,
            command: "/nonexistent/tether-cli",
            args: [],
            commandSource: "`tether-cli` on the PATH given to the process, after trying: the app has no tether-cli"
          }))
      }, "hello")
      expect(error.reason).toBe("SpawnFailed")
      expect(error.detail).toContain(
        "/nonexistent/tether-cli: `tether-cli` on the PATH given to the process, after trying: the app has no tether-cli"
      )
    }))

  it.live("a CLI that exits before its terminal record: the error carries the end of its stderr", () =>
    Effect.gen(function*() {
      const error = yield* runError(FakeCli.driver(), FakeCli.script({ op: "exit-early", code: 2 }))
      expect(error.reason).toBe("ExitedWithoutResult")
      expect(error.detail).toBe(
        "the provider process exited with code 2 before its terminal record; the end of its stderr:\n" +
          "fake-cli: exiting before output"
      )
    }))
})
