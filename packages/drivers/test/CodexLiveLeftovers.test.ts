/**
 * what a warm `codex app-server` leaves behind when its thread is closed or its
 * turn interrupted: a command Codex runs in the background (exec_command returns after
 * `yield_time_ms` while the command still runs). The real CLI (pinned 0.171.0) offline against the
 * scripted Responses server on 127.0.0.1.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import { offlineCodex } from "./CodexHarness.js"

const script: ResponsesServer.Script = (request) => {
  const last = ResponsesServer.userTexts(request).at(-1) ?? ""
  const output = ResponsesServer.lastFunctionCallOutput(request)
  if (output !== undefined) return ResponsesServer.text(`TOOL: ${output.text}`)
  const command = /BG: (.*)$/m.exec(last)?.[1]
  return command === undefined
    ? ResponsesServer.text(`PLAIN: ${last}`)
    : ResponsesServer.callTool({ name: "exec_command", input: { cmd: command, yield_time_ms: 300 } })
}

/** Pids whose command line contains `needle`. */
const pidsRunning = (needle: string): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").flatMap((entry) => {
    if (!/^[0-9]+$/.test(entry)) return []
    try {
      const cmdline = Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ")
      return cmdline.includes(needle) ? [Number(entry)] : []
    } catch {
      return []
    }
  })

const kill = (pids: ReadonlyArray<number>) => {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // gone
    }
  }
}

describe("Codex live processes left behind", () => {
  it.live(
    "a background command of a warm thread's turn does not outlive thread.close",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const needle = `${Math.floor(Math.random() * 1e6) + 1000}.25`
        const leftover = yield* Effect.gen(function*() {
          const server = yield* ResponsesServer.make({ script })
          const agent = yield* Agent.make({
            driver: offlineCodex(server.baseUrl),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          const thread = yield* agent.thread("bg")
          yield* thread.run(`BG: sleep ${needle}`)
          const during = pidsRunning(`sleep ${needle}`)
          yield* thread.close
          yield* Effect.sleep("1500 millis")
          const after = pidsRunning(`sleep ${needle}`)
          yield* agent.close()
          return { during, after }
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
        const afterAgent = pidsRunning(`sleep ${needle}`)
        kill(afterAgent)
        expect(leftover.during.length).toBeGreaterThan(0)
        expect(leftover.after).toEqual([])
        expect(afterAgent).toEqual([])
      }).pipe(Effect.scoped),
    90_000
  )
})
