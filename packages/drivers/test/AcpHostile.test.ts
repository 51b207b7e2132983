/**
 * The ACP driver against a hostile agent (built on the official SDK's agent side, written
 * into a temp dir and run with this Node as the driver's binary).
 *
 * - "hang": one chunk, then the prompt is never answered, and `session/cancel` is ignored.
 * - "die": one chunk, then the agent exits 3 mid-turn.
 * - "hostile": garbage on stdout (not JSON, a response to an unknown id, an unknown update kind),
 *   requests Tether does not implement (`fs/read_text_file`, `terminal/create`), and a permission
 *   request whose options have no reject kind; then the turn ends `end_turn`.
 * - anything else: "ok" and `end_turn`.
 *
 * Started with an argument, it answers `initialize` (`init-null`) or `session/new` (`new-null`,
 * `new-empty`) with a well-formed response whose result is garbage.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { Acp, Claude } from "@tether/drivers"
import { Harness, LiveChannel } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import * as AcpInternal from "../src/internal/acp.js"
import * as AcpMap from "../src/internal/acpMap.js"

const sdk = pathToFileURL(createRequire(import.meta.url).resolve("@agentclientprotocol/sdk")).href

const script = `
import * as acp from ${JSON.stringify(sdk)}
import { Readable, Writable } from "node:stream"
const raw = (value) => process.stdout.write((typeof value === "string" ? value : JSON.stringify(value)) + "\\n")
const never = () => new Promise(() => {})
const mode = process.argv[2]
acp.agent({ name: "hostile-agent" })
  .onRequest("initialize", () => mode === "init-null" ? null : { protocolVersion: 1, agentCapabilities: {} })
  .onRequest("session/new", () =>
    mode === "new-null" ? null : mode === "new-empty" ? {} : { sessionId: "hostile-session" })
  .onNotification("session/cancel", () => undefined)
  .onRequest("session/prompt", async ({ params, client }) => {
    const text = params.prompt.map((block) => block.text ?? "").join("")
    const sessionId = params.sessionId
    const say = (t) => client.notify("session/update", {
      sessionId,
      update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: t } }
    })
    if (text === "hang") {
      await say("started")
      return never()
    }
    if (text === "die") {
      await say("partial")
      setTimeout(() => process.exit(3), 100)
      return never()
    }
    if (text === "hostile") {
      raw("not json {")
      raw({ jsonrpc: "2.0", id: 987654, result: {} })
      raw({ jsonrpc: "2.0", method: "session/update", params: { sessionId, update: { sessionUpdate: "brand_new_kind", x: 1 } } })
      raw({ jsonrpc: "2.0", id: "fs1", method: "fs/read_text_file", params: { sessionId, path: "/etc/hostname" } })
      raw({ jsonrpc: "2.0", id: "t1", method: "terminal/create", params: { sessionId, command: "ls" } })
      raw({ jsonrpc: "2.0", id: "p1", method: "session/request_permission", params: {
        sessionId,
        toolCall: { toolCallId: "c1", title: "rm -rf /", kind: "execute" },
        options: [{ optionId: "go", name: "Go ahead", kind: "allow_always" }]
      } })
      raw("x".repeat(2 * 1024 * 1024))
      await new Promise((resolve) => setTimeout(resolve, 500))
      await say("done")
      return { stopReason: "end_turn" }
    }
    await say("ok")
    return { stopReason: "end_turn" }
  })
  .connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)))
`

/** The hostile agent's script in a temp dir (removed with the scope). */
const agentScript = Effect.acquireRelease(
  Effect.sync(() => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-acp-hostile-"))
    const file = Path.join(dir, "agent.mjs")
    Fs.writeFileSync(file, script)
    return { dir, file }
  }),
  ({ dir }) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

const driverOf = (file: string, mode?: string) =>
  Acp.driver({
    name: "hostile-acp",
    command: process.execPath,
    args: mode === undefined ? [file] : [file, mode],
    layout: Claude.layout,
    live: { cancelTimeout: "6 seconds" }
  })

/** An agent on the hostile script, short grace periods. */
const hostileAgent = (file: string, sandbox: Harness.Sandbox, mode?: string) =>
  Agent.make({
    driver: driverOf(file, mode),
    definition: { instructions: "", skills: [], tools: Toolkit.empty },
    workspace: sandbox.workspace,
    profile: sandbox.selection,
    processes: { killGrace: "1 second", exitGrace: "1 second" }
  })

const tags = (events: ReadonlyArray<{ readonly _tag: string }>) => events.map((e) => e._tag)

describe("the ACP driver against a hostile agent", () => {
  it.live(
    "an interrupted turn whose prompt the agent never ends: the process is shut down, the next turn runs",
    () =>
      Effect.gen(function*() {
        const { file } = yield* agentScript
        const sandbox = yield* Harness.sandbox
        const marker = yield* Effect.gen(function*() {
          const agent = yield* hostileAgent(file, sandbox)
          const thread = yield* agent.thread("hang")
          // A committed first turn: the warm process carries the thread's session (it is reused).
          expect((yield* thread.run("hello")).text).toBe("ok")
          const seen: Array<{ readonly _tag: string; readonly pid?: number }> = []
          const turn = yield* thread.stream("hang").pipe(
            Stream.runForEach((event) => Effect.sync(() => seen.push(event as never))),
            Effect.fork
          )
          const started = Date.now()
          while (!tags(seen).includes("TextDelta") && Date.now() - started < 15_000) yield* Effect.sleep("20 millis")
          expect(tags(seen)).toContain("TextDelta")
          const pid = seen.find((e) => e._tag === "ProcessStarted")?.pid
          expect(pid).toBeTypeOf("number")
          // Interrupt the turn: the agent never acknowledges (its prompt never ends).
          yield* Fiber.interrupt(turn)
          // Core: "one that does not acknowledge in time is shut down" (killGrace 1 s; + SIGTERM grace).
          yield* Effect.sleep("3500 millis")
          const left = yield* Harness.markedProcesses(agent.marker)
          // The next turn of the thread must run, not fail on the wedged process.
          const next = yield* Effect.exit(thread.run("hello"))
          expect({
            stillRunning: left.includes(pid!),
            next: Exit.isSuccess(next) ? next.value.text : String(Exit.isFailure(next) ? next.cause : "")
          }).toEqual({ stillRunning: false, next: "ok" })
          return agent.marker
        }).pipe(Effect.scoped)
        expect(yield* Harness.markedProcesses(marker)).toEqual([])
      }).pipe(Effect.scoped, Effect.provide([Harness.layer, ThreadStore.layerMemory])),
    30_000
  )

  it.live("the agent exits mid-turn: RunError ExitedWithoutResult, no process left", () =>
    Effect.gen(function*() {
      const { file } = yield* agentScript
      const sandbox = yield* Harness.sandbox
      const marker = yield* Effect.gen(function*() {
        const agent = yield* hostileAgent(file, sandbox)
        const thread = yield* agent.thread("die")
        const error = yield* Effect.flip(thread.run("die"))
        expect(error).toMatchObject({ _tag: "RunError", reason: "ExitedWithoutResult", exitCode: 3 })
        expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        return agent.marker
      }).pipe(Effect.scoped)
      expect(yield* Harness.markedProcesses(marker)).toEqual([])
    }).pipe(Effect.scoped, Effect.provide([Harness.layer, ThreadStore.layerMemory])), 30_000)

  for (
    const [mode, answer] of [
      ["init-null", "initialize answered with a null result"],
      ["new-null", "session/new answered with a null result"],
      ["new-empty", "session/new answered without a session id"]
    ] as const
  ) {
    it.live(
      `${answer}: the turn fails typed (the provider's error), no defect, no process left`,
      () =>
        Effect.gen(function*() {
          const { file } = yield* agentScript
          const sandbox = yield* Harness.sandbox
          const marker = yield* Effect.gen(function*() {
            const agent = yield* hostileAgent(file, sandbox, mode)
            const thread = yield* agent.thread(mode)
            const exit = yield* Effect.exit(thread.run("hello"))
            expect(Exit.isFailure(exit) && Cause.isDie(exit.cause) ? Cause.pretty(exit.cause) : "no defect").toBe(
              "no defect"
            )
            expect(Exit.isFailure(exit) && Cause.failureOption(exit.cause)).toMatchObject({
              value: { _tag: "RunError", reason: "ProtocolError" }
            })
            const said = mode === "init-null"
              ? "initialize without a result object"
              : "session/new without a session id"
            expect(Exit.isFailure(exit) && Cause.pretty(exit.cause)).toContain(
              `ProviderError: the agent answered ${said}`
            )
            return agent.marker
          }).pipe(Effect.scoped)
          for (let i = 0; i < 60 && (yield* Harness.markedProcesses(marker)).length > 0; i++) {
            yield* Effect.sleep("50 millis")
          }
          expect(yield* Harness.markedProcesses(marker)).toEqual([])
        }).pipe(Effect.scoped, Effect.provide([Harness.layer, ThreadStore.layerMemory])),
      30_000
    )
  }

  it.live(
    "garbage, unknown ids and kinds, unimplemented methods, a permission without reject kinds",
    () =>
      Effect.gen(function*() {
        const { file } = yield* agentScript
        const proc = yield* LiveChannel.spawn({
          command: process.execPath,
          args: [file],
          env: { PATH: process.env["PATH"] ?? "" },
          cwd: process.cwd(),
          stdin: undefined,
          files: []
        }).pipe(Effect.provide(NodeContext.layer))
        const request: Driver.InvocationRequest = {
          runId: "run",
          prompt: "",
          model: undefined,
          profileDir: "/nonexistent",
          siblings: {},
          workspace: process.cwd(),
          hosted: {
            key: "tether",
            url: "http://127.0.0.1:9/mcp",
            tokenVariable: "TETHER_TEST_TOKEN_5F0C2A9B",
            tools: []
          },
          instructions: "",
          skills: [],
          mcp: [],
          session: { _tag: "New", id: "unused" },
          sandbox: undefined,
          hostEnv: {}
        }
        const live = yield* AcpInternal.attach(
          {
            naming: AcpMap.genericNaming,
            startTimeout: "20 seconds",
            hostedToolsTimeout: "5 seconds",
            cancelTimeout: "5 seconds",
            permission: AcpInternal.denyPermission,
            sources: false
          },
          proc.channel,
          {
            hostedKey: "tether",
            session: request.session,
            request,
            hostedToken: Redacted.make("token-value"),
            hostedToolsListed: Effect.void
          }
        )
        const outputs = Chunk.toReadonlyArray(
          yield* live.turn({ runId: "a", prompt: "hostile" }).pipe(Stream.runCollect, Effect.timeout("15 seconds"))
        )
        expect(outputs.at(-1)).toMatchObject({ _tag: "Terminal", ok: true, text: "done" })
        const notices = outputs.flatMap((o) => o._tag === "Notice" ? [o.kind] : [])
        expect(notices).toEqual(expect.arrayContaining(["acp.non_json", "acp.brand_new_kind", "acp.permission"]))
        const answers = proc.frames.filter((f) => f.dir === "in").map((f) => JSON.parse(f.line)).filter((m) =>
          ["fs1", "t1", "p1"].includes(m.id)
        )
        expect(answers.find((m) => m.id === "fs1")).toMatchObject({ error: { code: -32601 } })
        expect(answers.find((m) => m.id === "t1")).toMatchObject({ error: { code: -32601 } })
        expect(answers.find((m) => m.id === "p1")).toMatchObject({ result: { outcome: { outcome: "cancelled" } } })
        // The session still serves a turn.
        const again = Chunk.toReadonlyArray(
          yield* live.turn({ runId: "b", prompt: "again" }).pipe(Stream.runCollect, Effect.timeout("10 seconds"))
        )
        expect(again.at(-1)).toMatchObject({ _tag: "Terminal", ok: true, text: "ok" })
      }).pipe(Effect.scoped),
    30_000
  )
})
