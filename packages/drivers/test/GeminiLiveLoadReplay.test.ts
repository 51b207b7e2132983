/**
 * A Gemini CLI live session of six turns resumed in a new process (`session/load`). Gemini CLI
 * replays the loaded session's history as `session/update` notifications without awaiting them
 * (`session.streamHistory(...)` is not awaited before the load's response), so most of the replay
 * reaches stdout after the response: the first resumed turn took it for its own (every old prompt
 * a user `Message`, every old reply a `TextDelta`, its Terminal text all of them joined). A
 * resumed turn's outputs and its Terminal text are the turn's own.
 */
import { NodeContext } from "@effect/platform-node"
import * as FileSystem from "@effect/platform/FileSystem"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import * as Unstable from "@tether/core/Unstable"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness, LiveChannel } from "@tether/testing"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { baseRequest, type Root, tempRoot } from "./ClaudeHarness.js"

const latestPrompt = (request: GeminiServer.GenerateRequest): string => {
  const text = GeminiServer.transcript(request).at(-1)?.[1] ?? ""
  const end = "</session_context>"
  const at = text.lastIndexOf(end)
  return at === -1 ? text : text.slice(at + end.length)
}

/** Renames the clone's chat files as if written a year earlier (no wait for the next minute). */
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

/** `live.open`, the files, the spawn and `live.attach`, as core does (no hosted tools). */
const open = (driver: Driver.Driver, request: Driver.InvocationRequest) =>
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
      env: { ...invocation.env, [request.hosted.tokenVariable]: "unused", [Unstable.markerVariable]: marker }
    })
    const session = yield* driver.live!.attach(proc.channel, {
      hostedKey: request.hosted.key,
      session: request.session,
      request,
      hostedToken: Redacted.make("unused"),
      hostedToolsListed: Effect.void
    })
    return { proc, session, marker }
  }).pipe(Effect.provide(NodeContext.layer))

const collect = (stream: Stream.Stream<Driver.Output, Driver.ProtocolError>) =>
  stream.pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))

describe("Gemini session/load replay and the first resumed turn (real CLI)", () => {
  it.live(
    "the first turn after a load carries only its own outputs; its Terminal text is its own answer",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        yield* Effect.orDie(Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeDirectory(`${root.profile}/.gemini`)))
        const model = yield* GeminiServer.make({
          respond: (request) => GeminiServer.reply(`reply to: ${latestPrompt(request)}`)
        })
        const driver = Gemini.driver({
          model: "gemini-2.5-flash",
          env: { GOOGLE_GEMINI_BASE_URL: model.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
        })
        const request = baseRequest(root, "http://127.0.0.1:9/mcp", {
          prompt: "",
          hosted: {
            key: "tether",
            url: "http://127.0.0.1:9/mcp",
            tokenVariable: "TETHER_TEST_TOKEN_5F0C2A9B",
            tools: []
          }
        })
        const first = yield* Scope.make()
        const a = yield* open(driver, request).pipe(Scope.extend(first))
        let sessionId = ""
        for (let i = 1; i <= 6; i++) {
          const outputs = yield* collect(a.session.turn({ runId: `r${i}`, prompt: `turn ${i}: history` }))
          const started = outputs.find((o) => o._tag === "SessionStarted")
          if (started?._tag === "SessionStarted") sessionId = started.sessionId
        }
        yield* a.session.shutdown
        yield* Scope.close(first, Exit.void)
        yield* olderSessionFiles(root)

        const second = yield* Scope.make()
        const b = yield* open(driver, { ...request, session: { _tag: "Resume", id: sessionId } }).pipe(
          Scope.extend(second)
        )
        const resumed = yield* collect(b.session.turn({ runId: "r7", prompt: "after resume" }))
        const terminal = resumed.at(-1)
        const messages = resumed.flatMap((o) => o._tag === "Message" ? [`${o.role}: ${o.text}`] : [])
        const deltas = resumed.flatMap((o) => o._tag === "TextDelta" ? [o.text] : []).join("")
        yield* b.session.shutdown
        yield* Scope.close(second, Exit.void)
        expect(yield* Harness.markedProcesses(a.marker)).toEqual([])
        expect(yield* Harness.markedProcesses(b.marker)).toEqual([])
        expect({ messages, deltas, text: terminal?._tag === "Terminal" ? terminal.text : undefined }).toEqual({
          messages: ["user: after resume", "assistant: reply to: after resume"],
          deltas: "reply to: after resume",
          text: "reply to: after resume"
        })
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    120_000
  )
})
