/**
 * A turn's built-in tool policy through the real Codex CLI (pinned 0.171.0), offline against the
 * scripted Responses server: the denied built-ins are switched off for that run and are not
 * offered to the model; a turn's sandbox level narrows the agent's for that run.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import { offlineCodex } from "./CodexHarness.js"

const offered = (request: ResponsesServer.RecordedRequest | undefined): ReadonlyArray<string> => {
  const tools =
    (request?.body as { readonly tools?: ReadonlyArray<{ readonly name?: string; readonly type?: string }> })
      ?.tools ?? []
  return tools.map((tool) => tool.name ?? tool.type ?? "?")
}

describe("Codex built-in tool policy (real CLI)", () => {
  it.live(
    "denied built-ins are not offered for that turn only; an unmappable name fails before spawn",
    () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make()
        const sandbox = yield* Harness.sandbox
        yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: offlineCodex(server.baseUrl),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          yield* agent.run({ input: "Hello.", builtinTools: { deny: ["exec_command", "view_image", "web_search"] } })
          yield* agent.run("Hello.")
          // Names of every JavaScript object's members too: a typed error, not a defect.
          for (const name of ["teleport", "constructor", "toString"]) {
            const unmappable = yield* Effect.flip(agent.run({ input: "x", builtinTools: { deny: [name] } }))
            expect(unmappable).toMatchObject({ _tag: "RunError", reason: "PrepareFailed" })
            expect(unmappable.message).toContain(name)
          }
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
        const [first, second, ...rest] = yield* server.requests
        expect(rest).toEqual([])
        for (const name of ["exec_command", "write_stdin", "view_image", "web_search"]) {
          expect(offered(first)).not.toContain(name)
          expect(offered(second)).toContain(name)
        }
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a turn's sandbox level narrows the agent's: readOnly makes a write fail in Codex's sandbox, one-shot and live",
    () =>
      Effect.gen(function*() {
        // The model runs the command after `RUN: ` with exec_command, then reports its output.
        const server = yield* ResponsesServer.make({
          script: (request) => {
            const output = ResponsesServer.lastFunctionCallOutput(request)
            if (output !== undefined) return ResponsesServer.text(`TOOL: ${output.text}`)
            const command = /RUN: (.*)$/m.exec(ResponsesServer.userTexts(request).at(-1) ?? "")?.[1] ?? "true"
            return ResponsesServer.callTool({ name: "exec_command", input: { cmd: command, yield_time_ms: 10_000 } })
          }
        })
        const sandbox = yield* Harness.sandbox
        yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: offlineCodex(server.baseUrl),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            policy: { sandbox: "workspaceWrite" }
          })
          const file = (name: string) => `${sandbox.workspace}/${name}`
          const readOnly = { sandbox: "readOnly" } as const
          // One-shot (`codex exec --config sandbox_mode=…`).
          yield* agent.run(`RUN: touch ${file("written")}`)
          expect(Fs.existsSync(file("written"))).toBe(true)
          const refused = yield* agent.run({ input: `RUN: touch ${file("refused")}`, builtinTools: readOnly })
          expect(Fs.existsSync(file("refused"))).toBe(false)
          expect(refused.text).toMatch(/Read-only file system/)
          // A live thread: the level is the process's configuration, so the narrowed turn gets a
          // fresh process, and the next turn at the agent's level another one.
          const thread = yield* agent.thread("sandbox-per-turn")
          const collect = (turn: Agent.Turn) => Effect.map(Stream.runCollect(thread.stream(turn)), (c) => Array.from(c))
          const started = (events: ReadonlyArray<Event.Event>) =>
            events.find((e): e is Event.ProcessStarted => e._tag === "ProcessStarted")
          const first = yield* collect({ input: `RUN: touch ${file("live-written")}` })
          expect(Fs.existsSync(file("live-written"))).toBe(true)
          const second = yield* collect({ input: `RUN: touch ${file("live-refused")}`, builtinTools: readOnly })
          expect(Fs.existsSync(file("live-refused"))).toBe(false)
          expect((second.at(-1) as Event.RunFinished).result.text).toMatch(/Read-only file system/)
          const third = yield* collect({ input: `RUN: touch ${file("live-again")}` })
          expect(Fs.existsSync(file("live-again"))).toBe(true)
          const pids = [first, second, third].map((events) => started(events))
          expect(pids.map((p) => p?.reused)).toEqual([undefined, undefined, undefined])
          expect(new Set(pids.map((p) => p?.pid)).size).toBe(3)
          // Wider than the agent's: refused before anything runs.
          const widened = yield* Effect.flip(thread.run({ input: "x", builtinTools: { sandbox: "unrestricted" } }))
          expect(widened).toMatchObject({ _tag: "InvalidTurn", reason: "PolicyWidened" })
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped),
    120_000
  )
})
