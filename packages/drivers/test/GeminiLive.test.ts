/**
 * Gemini's live protocol (`gemini --acp` through Tether's ACP client) against the real pinned
 * Gemini CLI (0.61.0), offline: the scripted GeminiServer plays the model, a real Gateway
 * registration serves the hosted tools on a per-process credential, and `LiveChannel` runs the
 * process as core would (the invocation's files materialized into a temp clone, exactly its
 * environment plus the token variable and the marker). Four CLI processes (≈3 s to start each).
 *
 * `TETHER_RECORD_ACP=1` rewrites `fixtures/gemini-acp/` from the first test's session.
 */
import { NodeContext } from "@effect/platform-node"
import * as FileSystem from "@effect/platform/FileSystem"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import * as Unstable from "@tether/core/Unstable"
import { Gemini } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { GeminiServer, Harness, LiveChannel } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { baseRequest, type Root, tempRoot } from "./ClaudeHarness.js"

const Echo = Tool.make("echo", {
  description: "Echo the text back.",
  input: { text: Schema.String },
  output: Schema.Struct({ echoed: Schema.String }),
  revision: "echo/v1"
})
const SlowWait = Tool.make("slow_wait", {
  description: "Waits a long time.",
  input: {},
  output: Schema.Struct({ done: Schema.Boolean }),
  revision: "slow_wait/v1"
})
const Tools = Toolkit.make(Echo, SlowWait)

/** A gateway registration of `echo` and `slow_wait`; `slowStarted` completes when a slow call begins. */
const hostedTools = Effect.gen(function*() {
  const slowStarted = yield* Deferred.make<void>()
  const executor = yield* Toolkit.executor(Tools).pipe(
    Effect.provide(Tools.toLayer({
      echo: ({ text }) => Effect.succeed({ echoed: `ECHO:${text}` }),
      slow_wait: () =>
        Deferred.succeed(slowStarted, undefined).pipe(
          Effect.zipRight(Effect.sleep("60 seconds")),
          Effect.as({ done: true })
        )
    }))
  )
  const gateway = yield* Gateway.make()
  const registration = yield* gateway.register(executor)
  return { gateway, registration, slowStarted }
})

const driverFor = (model: GeminiServer.GeminiServer, live?: Gemini.Config["live"]) =>
  Gemini.driver({
    model: "gemini-2.5-flash",
    env: { GOOGLE_GEMINI_BASE_URL: model.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") },
    ...(live === undefined ? {} : { live })
  })

interface Opened {
  readonly process: LiveChannel.LiveProcess
  readonly session: Driver.LiveSession
  readonly marker: string
}

/**
 * What core does for a live process: `live.open`, the files into the clone, the spawn with the
 * token variable of the process's own credential (`environment`) and the marker, `live.attach` with
 * the session's credential (another one: the CLI's native configuration connects with the
 * variable's at start, and that listing must not count as the session's).
 */
const openLive = (
  driver: Driver.Driver,
  request: Driver.InvocationRequest,
  credentials: {
    readonly environment: Redacted.Redacted<string>
    readonly session: { readonly token: Redacted.Redacted<string>; readonly listed: Effect.Effect<void> }
  },
  presented: Redacted.Redacted<string> = credentials.session.token
): Effect.Effect<Opened, Driver.ProtocolError, Scope.Scope> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const invocation = yield* driver.live!.open(request)
    for (const file of invocation.files) {
      const target = Path.join(request.profileDir, file.path)
      yield* Effect.orDie(fs.makeDirectory(Path.dirname(target), { recursive: true }))
      yield* Effect.orDie(fs.writeFileString(target, file.content, { mode: file.mode ?? 0o600 }))
    }
    const marker = crypto.randomUUID()
    const proc = yield* LiveChannel.spawn({
      ...invocation,
      env: {
        ...invocation.env,
        [request.hosted.tokenVariable]: Redacted.value(credentials.environment),
        [Unstable.markerVariable]: marker
      }
    }).pipe(Effect.provide(NodeContext.layer))
    const session = yield* driver.live!.attach(proc.channel, {
      hostedKey: request.hosted.key,
      session: request.session,
      request,
      hostedToken: presented,
      hostedToolsListed: credentials.session.listed
    })
    return { process: proc, session, marker }
  }).pipe(Effect.provide(NodeContext.layer))

const collect = (stream: Stream.Stream<Driver.Output, Driver.ProtocolError>) =>
  stream.pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))

/** The user's text of the request's last content (the CLI puts its session context before the first). */
const latestPrompt = (request: GeminiServer.GenerateRequest): string => {
  const text = GeminiServer.transcript(request).at(-1)?.[1] ?? ""
  const end = "</session_context>"
  const at = text.lastIndexOf(end)
  return at === -1 ? text : text.slice(at + end.length)
}

/** Output tags, a run of deltas as one. */
const kinds = (outputs: ReadonlyArray<Driver.Output>): ReadonlyArray<string> =>
  outputs.map((o) => o._tag).filter((tag, i, all) => !(tag === "TextDelta" && all[i - 1] === "TextDelta"))

const terminalOf = (outputs: ReadonlyArray<Driver.Output>): Driver.Terminal => {
  const last = outputs.at(-1)
  if (last?._tag !== "Terminal") throw new Error(`the turn did not end with its Terminal: ${JSON.stringify(last)}`)
  return last
}

/** Waits until the model server has received `count` generate requests. */
const waitGenerations = (model: GeminiServer.GeminiServer, count: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1500; i++) {
      if ((yield* model.generations).length >= count) return
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.dieMessage(`the model never received request ${count}`)
  })

/** Renames the clone's chat files as if written a year earlier (their name carries the minute). */
const olderSessionFiles = (root: Root) =>
  Effect.sync(() => {
    const tmp = Path.join(root.profile, ".gemini", "tmp")
    for (const project of Fs.readdirSync(tmp)) {
      const chats = Path.join(tmp, project, "chats")
      if (!Fs.existsSync(chats)) continue
      for (const name of Fs.readdirSync(chats)) {
        const older = name.replace(/^session-\d{4}/, (head) => `session-${Number(head.slice(8)) - 1}`)
        if (older !== name) Fs.renameSync(Path.join(chats, name), Path.join(chats, older))
      }
    }
  })

const profileDir = (root: Root) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeDirectory(`${root.profile}/.gemini`))

describe("Gemini live (gemini --acp) with the real CLI", () => {
  it.live(
    "turns on one warm process carry the conversation; host tools; cancel with a slow model and a slow tool; resume with session/load",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        yield* Effect.orDie(profileDir(root))
        const hosted = yield* hostedTools
        const model = yield* GeminiServer.make({
          respond: GeminiServer.roundTrip(
            (request) => GeminiServer.reply(`reply to: ${latestPrompt(request)}`),
            (responses) => GeminiServer.reply(`FINAL: ${responses.map((r) => r.output).join("|")}`)
          )
        })
        const driver = driverFor(model)
        const mint = hosted.registration.credential({
          tools: ["echo", "slow_wait"],
          ...(driver.injectedArguments === undefined ? {} : { injectedArguments: driver.injectedArguments })
        })
        const credentials = { environment: (yield* mint).token, session: yield* mint }
        const token = Redacted.value(credentials.session.token)
        const request = baseRequest(root, hosted.registration.url, {
          prompt: "",
          hosted: {
            key: "tether",
            url: hosted.registration.url,
            tokenVariable: hosted.registration.tokenVariable,
            tools: ["echo", "slow_wait"]
          }
        })
        const first = yield* Scope.make()
        const opened = yield* openLive(driver, request, credentials).pipe(Scope.extend(first))
        const { process: proc, session } = opened

        // Turn 1: plain text. The first turn starts the session.
        const turn1 = yield* collect(session.turn({ runId: "r1", prompt: "turn one: remember BANANA" }))
        expect(kinds(turn1)).toEqual([
          "SessionStarted",
          "Message",
          "TextDelta",
          "Message",
          "Usage",
          "Terminal"
        ])
        const sessionId = turn1[0]!._tag === "SessionStarted" ? turn1[0].sessionId : ""
        expect(turn1[0]).toMatchObject({ _tag: "SessionStarted", model: "gemini-2.5-flash" })
        expect(turn1[1]).toEqual({ _tag: "Message", role: "user", text: "turn one: remember BANANA" })
        expect(terminalOf(turn1)).toMatchObject({
          ok: true,
          text: "reply to: turn one: remember BANANA",
          session: sessionId,
          model: "gemini-2.5-flash"
        })

        // Turn 2: a hosted tool call on the warm process, through the gateway.
        yield* model.enqueue(GeminiServer.callTool("echo", { text: "hello-live" }))
        const turn2 = yield* collect(session.turn({ runId: "r2", prompt: "turn two: echo hello-live" }))
        expect(turn2[0]).toEqual({ _tag: "Message", role: "user", text: "turn two: echo hello-live" })
        const calls = turn2.filter((o): o is Extract<Driver.Output, { _tag: "ToolCall" }> => o._tag === "ToolCall")
        expect(calls.map((c) => [c.phase, c.name, c.source])).toEqual([["start", "echo", "host"], [
          "end",
          "echo",
          "host"
        ]])
        expect(calls[1]).toMatchObject({ isError: false })
        expect(String(calls[1]!.output)).toContain("ECHO:hello-live")
        expect(terminalOf(turn2)).toMatchObject({ ok: true, session: sessionId })
        expect(terminalOf(turn2).text).toContain("FINAL:")

        // Turn 3: its request to the model carries turns 1 and 2.
        const turn3 = yield* collect(session.turn({ runId: "r3", prompt: "turn three: what word?" }))
        expect(terminalOf(turn3).ok).toBe(true)
        const third = (yield* model.generations).at(-1)!
        const said = GeminiServer.transcript(third).map(([, text]) => text).join("\n")
        expect(said).toContain("turn one: remember BANANA")
        expect(said).toContain("turn two: echo hello-live")
        expect(said).toContain("turn three: what word?")
        expect(GeminiServer.declaredTools(third)).toEqual(expect.arrayContaining(["mcp_tether_echo"]))

        // Turn 4: interrupted while the model is slow; the process stays warm.
        yield* model.enqueue(GeminiServer.reply("too late", { delay: 60_000 }))
        const before = (yield* model.generations).length
        const slow = yield* Effect.fork(collect(session.turn({ runId: "r4", prompt: "turn four: slow model" })))
        yield* waitGenerations(model, before + 1)
        yield* session.interrupt
        const turn4 = yield* Fiber.join(slow)
        expect(terminalOf(turn4)).toMatchObject({ ok: false, error: "the turn was cancelled" })

        // Turn 5: the same process answers again.
        const turn5 = yield* collect(session.turn({ runId: "r5", prompt: "turn five: after the cancel" }))
        expect(terminalOf(turn5)).toMatchObject({ ok: true, text: "reply to: turn five: after the cancel" })

        // Turn 6: interrupted during a slow host tool.
        yield* model.enqueue(GeminiServer.callTool("slow_wait", {}))
        const tool = yield* Effect.fork(collect(session.turn({ runId: "r6", prompt: "turn six: slow tool" })))
        yield* Deferred.await(hosted.slowStarted)
        yield* session.interrupt
        const turn6 = yield* Fiber.join(tool)
        expect(terminalOf(turn6)).toMatchObject({ ok: false, error: "the turn was cancelled" })

        // Turn 7: and again, on the same pid.
        const turn7 = yield* collect(session.turn({ runId: "r7", prompt: "turn seven: still warm" }))
        expect(terminalOf(turn7)).toMatchObject({ ok: true, text: "reply to: turn seven: still warm" })
        expect(yield* Harness.isAlive(proc.pid)).toBe(true)
        expect(yield* Harness.markedProcesses(opened.marker)).toContain(proc.pid)

        // Turn 8: the CLI asks permission for a shell command; without approvals (no
        // `LiveContext.approve`) the answer is a deny (its `cancel` option), the tool fails for the
        // model and the turn goes on.
        yield* model.enqueue(GeminiServer.callTool("run_shell_command", { command: "echo denied > denied.txt" }))
        const turn8 = yield* collect(session.turn({ runId: "r8", prompt: "turn eight: run a command" }))
        expect(terminalOf(turn8)).toMatchObject({ ok: true })
        expect(turn8.filter((o) => o._tag === "Notice")).toEqual([
          expect.objectContaining({ level: "warning", kind: "acp.permission" })
        ])
        const denied = GeminiServer.functionResponses((yield* model.generations).at(-1)!)
        expect(denied.map((r) => r.name)).toEqual(["run_shell_command"])
        expect(denied[0]!.output).toContain("canceled by the user")
        expect(Fs.existsSync(Path.join(root.work, "denied.txt"))).toBe(false)

        // The token went to the CLI, but nothing Tether keeps or emits has it.
        const everything = [
          ...proc.frames.map((f) => f.line),
          ...[turn1, turn2, turn3, turn4, turn5, turn6, turn7, turn8].flat().map((o) => JSON.stringify(o)),
          proc.stderr()
        ].join("\n")
        expect(everything).not.toContain(token)
        const created = proc.frames.find((f) => f.dir === "in" && f.line.includes(`"session/new"`))!
        expect(created.line).toMatch(/"value":"Bearer tether-secret-[A-Za-z0-9_-]+"/)

        if (process.env["TETHER_RECORD_ACP"] === "1") {
          const dir = Path.join(import.meta.dirname, "fixtures", "gemini-acp")
          Fs.mkdirSync(dir, { recursive: true })
          const lines = (dir: "in" | "out") => proc.frames.filter((f) => f.dir === dir).map((f) => `${f.line}\n`)
          Fs.writeFileSync(Path.join(dir, "session.jsonl"), lines("out").join(""))
          Fs.writeFileSync(Path.join(dir, "session.stdin.ndjson"), lines("in").join(""))
        }

        // Shutdown (stdin closed), then the scope's escalation as core's: nothing is left.
        const closing = performance.now()
        yield* session.shutdown
        yield* Scope.close(first, Exit.void)
        const closeMs = performance.now() - closing
        expect(yield* Harness.markedProcesses(opened.marker)).toEqual([])
        expect(yield* Harness.isAlive(proc.pid)).toBe(false)

        // Resume in a new process: session/load, and the next request carries the earlier turns.
        // (Loading in the minute the session was created makes the driver wait for the next
        // minute, see `GeminiLiveParse.test.ts`; the session is made older than that here.)
        yield* olderSessionFiles(root)
        const again = { environment: (yield* mint).token, session: yield* mint }
        const resumed = yield* openLive(driver, { ...request, session: { _tag: "Resume", id: sessionId } }, again)
        const turn9 = yield* collect(resumed.session.turn({ runId: "r9", prompt: "turn nine: after resume" }))
        expect(turn9[0]).toMatchObject({ _tag: "SessionStarted", sessionId })
        expect(terminalOf(turn9)).toMatchObject({ ok: true, session: sessionId })
        expect(resumed.process.pid).not.toBe(proc.pid)
        const after = GeminiServer.transcript((yield* model.generations).at(-1)!).map(([, text]) => text).join("\n")
        expect(after).toContain("turn one: remember BANANA")
        expect(after).toContain("turn seven: still warm")
        expect(after).toContain("turn nine: after resume")
        console.info(`gemini live: shutdown to gone ${Math.round(closeMs)} ms`)
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    240_000
  )

  it.live(
    "a wrong token fails with HostedToolsUnavailable before the first prompt (the CLI drops the server silently)",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        yield* Effect.orDie(profileDir(root))
        const hosted = yield* hostedTools
        const model = yield* GeminiServer.make({ respond: () => GeminiServer.reply("unused") })
        const driver = driverFor(model, { hostedToolsTimeout: "2 seconds" })
        const mint = hosted.registration.credential({ tools: ["echo"] })
        const credentials = { environment: (yield* mint).token, session: yield* mint }
        const request = baseRequest(root, hosted.registration.url, {
          prompt: "",
          hosted: {
            key: "tether",
            url: hosted.registration.url,
            tokenVariable: hosted.registration.tokenVariable,
            tools: ["echo"]
          }
        })
        // The settings' entry connects at start with the environment's (valid) token; the session's
        // declaration carries a wrong one: the session has no hosted tools, and the check sees it.
        const failure = yield* openLive(driver, request, credentials, Redacted.make("wrong-token")).pipe(
          Effect.as("attached, with a wrong token" as const),
          Effect.flip
        )
        expect(failure).toMatchObject({ _tag: "ProtocolError", reason: "HostedToolsUnavailable" })
        expect(failure.detail).toContain(`MCP server "tether"`)
        expect(yield* model.generations).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    120_000
  )

  it.live(
    "a process killed mid-turn fails the turn and the next one at once; nothing is left",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        yield* Effect.orDie(profileDir(root))
        const model = yield* GeminiServer.make({ script: [GeminiServer.reply("never sent", { delay: 60_000 })] })
        const driver = driverFor(model)
        // No hosted tool this time: nothing is declared and nothing is awaited.
        const never = {
          environment: Redacted.make("unused-token"),
          session: { token: Redacted.make("unused-token"), listed: Effect.never }
        }
        const request = baseRequest(root, "http://127.0.0.1:9/mcp", {
          prompt: "",
          hosted: {
            key: "tether",
            url: "http://127.0.0.1:9/mcp",
            tokenVariable: "TETHER_TEST_TOKEN_5F0C2A9B",
            tools: []
          }
        })
        const scope = yield* Scope.make()
        const opened = yield* openLive(driver, request, never).pipe(Scope.extend(scope))
        const created = opened.process.frames.find((f) => f.dir === "in" && f.line.includes(`"session/new"`))!
        expect(JSON.parse(created.line).params.mcpServers).toEqual([])
        const running = yield* Effect.fork(collect(opened.session.turn({ runId: "k1", prompt: "slow" })))
        yield* waitGenerations(model, 1)
        yield* opened.process.kill
        const failed = yield* Fiber.join(running).pipe(Effect.flip, Effect.timeout("30 seconds"))
        expect(failed).toMatchObject({ _tag: "ProtocolError", reason: "ProviderError" })
        expect(failed.detail).toContain("the agent's process ended")
        const next = yield* collect(opened.session.turn({ runId: "k2", prompt: "again" })).pipe(
          Effect.flip,
          Effect.timeout("30 seconds")
        )
        expect(next.detail).toContain("the agent's process ended")
        yield* Scope.close(scope, Exit.void)
        expect(yield* Harness.markedProcesses(opened.marker)).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    120_000
  )
})
