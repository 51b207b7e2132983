/**
 * A non-Effect host over a `ManagedRuntime` (docs/effect-apps-and-other-hosts.md) with the
 * real CLIs offline: `runtime.dispose()` while a one-shot run, a live thread's turn or a host tool
 * call is in flight settles the pending promise and leaves no process and no clone.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { Profile } from "@tether/profile"
import { AnthropicServer, Conformance, Harness, ResponsesServer } from "@tether/testing"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import type * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"
import { driverFor as claudeDriver, respond as claudeRespond } from "./ClaudeLiveHarness.js"
import { offlineCodex } from "./CodexHarness.js"

class Assistant extends Context.Tag("host/CliAssistant")<Assistant, Agent.Agent>() {}

const Tools = Conformance.liveTools
let waiting = 0
const ToolsLive = Tools.toLayer({
  wait: ({ ms }) =>
    Effect.sync(() => waiting++).pipe(
      Effect.zipRight(Effect.sleep(ms)),
      Effect.ensuring(Effect.sync(() => waiting--)),
      Effect.as({ waited: ms })
    ),
  echo: ({ text }) => Effect.succeed(`ECHO:${text}`)
})

const lineOf = (text: string) => text.trim().split("\n").at(-1)!.trim()

const subjects: ReadonlyArray<
  { readonly name: string; readonly driver: Effect.Effect<Driver.Driver, unknown, Scope.Scope> }
> = [
  { name: "claude", driver: Effect.map(AnthropicServer.make({ respond: claudeRespond }), (s) => claudeDriver(s)) },
  {
    name: "codex",
    driver: Effect.map(
      ResponsesServer.make({
        script: (request) => {
          if (ResponsesServer.lastFunctionCallOutput(request) !== undefined) return ResponsesServer.text("FINAL")
          const line = lineOf(ResponsesServer.userTexts(request).at(-1) ?? "")
          const call = /^CALL (\d+)$/.exec(line)
          if (call !== null) return ResponsesServer.mcpTool("tether", "wait", { ms: Number(call[1]) })
          const slow = /^SLOW (\d+)$/.exec(line)
          if (slow !== null) return ResponsesServer.delayed(Number(slow[1]), ResponsesServer.text("slow answer"))
          return ResponsesServer.text(`answer to ${line}`)
        }
      }),
      (s) => offlineCodex(s.baseUrl)
    )
  }
]

const makeDirs = () => {
  const base = Fs.realpathSync(Fs.mkdtempSync(NodePath.join(Os.tmpdir(), "tether-mrcli-")))
  const source = NodePath.join(base, "source")
  const root = NodePath.join(base, "clones")
  const workspace = NodePath.join(base, "workspace")
  Fs.mkdirSync(source, { mode: 0o700 })
  Fs.mkdirSync(workspace)
  return {
    base,
    root,
    workspace,
    selection: Profile.cloneFrom(source, root, { sessions: NodePath.join(base, "sessions") })
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
const marked = (marker: string) => Effect.runSync(Harness.markedProcesses(marker))
const settled = <A>(promise: Promise<A>, ms: number) =>
  Promise.race([
    promise.then((value) => ({ status: "resolved" as const, value }), (error: unknown) => ({
      status: "rejected" as const,
      error: String(error).split("\n")[0]
    })),
    sleep(ms).then(() => ({ status: "pending" as const }))
  ])

describe("ManagedRuntime dispose with the real CLIs in flight", () => {
  for (const subject of subjects) {
    for (const mode of ["one-shot SLOW", "live SLOW", "live CALL"] as const) {
      it(`${subject.name}: dispose during a ${mode} turn settles the promise; no process, no clone`, async () => {
        const dirs = makeDirs()
        const runtime = ManagedRuntime.make(
          Layer.unwrapScoped(Effect.map(subject.driver, (driver) =>
            Agent.layer(Assistant, {
              driver,
              definition: { instructions: "", skills: [], tools: Tools },
              workspace: dirs.workspace,
              profile: dirs.selection,
              processes: { killGrace: "500 millis", exitGrace: "500 millis" }
            }))).pipe(
              Layer.provide(ToolsLive),
              Layer.provide(Harness.layer),
              Layer.provide(Logger.minimumLogLevel(LogLevel.None))
            )
        )
        try {
          const agent = await runtime.runPromise(Assistant)
          const prompt = mode.endsWith("CALL") ? "CALL 60000" : "SLOW 60000"
          let pending: Promise<unknown>
          if (mode === "one-shot SLOW") {
            pending = runtime.runPromise(agent.run(prompt))
          } else {
            const thread = await runtime.runPromise(agent.thread("k"))
            expect((await runtime.runPromise(thread.run("hello"))).text).toContain("answer to hello")
            pending = runtime.runPromise(thread.run(prompt))
          }
          pending.catch(() => undefined)
          const until = Date.now() + 30_000
          while ((mode.endsWith("CALL") ? waiting === 0 : marked(agent.marker).length === 0) && Date.now() < until) {
            await sleep(50)
          }
          await sleep(mode.endsWith("CALL") ? 100 : 1500)
          expect(marked(agent.marker).length).toBeGreaterThan(0)
          const disposed = await settled(runtime.dispose(), 20_000)
          const outcome = await settled(pending, 3_000)
          expect({
            disposed: disposed.status,
            outcome: outcome.status,
            processes: marked(agent.marker),
            clones: Fs.existsSync(dirs.root) ? Fs.readdirSync(dirs.root) : [],
            toolHandlers: waiting
          }).toEqual({ disposed: "resolved", outcome: "rejected", processes: [], clones: [], toolHandlers: 0 })
        } finally {
          await runtime.dispose()
          Fs.rmSync(dirs.base, { recursive: true, force: true })
        }
      }, 90_000)
    }
  }
})
