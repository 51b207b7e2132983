/**
 * Test harness for Claude Code's live protocol at the driver level: a scripted model whose reply
 * is chosen by the last line of the last user message, a real gateway registration with a slow
 * `wait` tool, a live process spawned with `LiveChannel` from `driver.live.open` (its files
 * materialized into a temp clone as core would), a turn runner that lets a test act mid-turn,
 * and a channel that replays recorded frames (fixtures/claude-live) to the session.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type * as Driver from "@tether/core/Driver"
import { Claude } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { AnthropicServer, LiveChannel } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { baseRequest, claudeBinary, tempRoot } from "./ClaudeHarness.js"

export const fixtureDir = Path.join(import.meta.dirname, "fixtures", "claude-live")

const Wait = Tool.make("wait", {
  description: "Wait for the given number of milliseconds.",
  input: { ms: Schema.Number },
  output: Schema.Struct({ waited: Schema.Number }),
  revision: "wait/v1"
})

/** The gateway registration serving `wait` (it really sleeps). */
export const registration = Effect.gen(function*() {
  const gateway = yield* Gateway.Gateway
  const tools = Toolkit.make(Wait)
  const executor = yield* Toolkit.executor(tools).pipe(
    Effect.provide(tools.toLayer({ wait: ({ ms }) => Effect.as(Effect.sleep(ms), { waited: ms }) }))
  )
  return yield* gateway.register(executor)
})

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const blocksOf = (content: unknown): ReadonlyArray<{ readonly [key: string]: unknown }> =>
  typeof content === "string"
    ? [{ type: "text", text: content }]
    : Array.isArray(content)
    ? content.filter(isRecord)
    : []

/** The CLI's injected "new message while you were working" system messages of a request. */
export const systemTexts = (request: AnthropicServer.MessagesRequest): ReadonlyArray<string> =>
  request.messages.filter((m) => m.role === "system").flatMap((m) =>
    blocksOf(m.content).flatMap((b) => typeof b["text"] === "string" ? [b["text"]] : [])
  )

/**
 * The scripted model. The last user message decides: ending with tool results → `FINAL: <results>`; a last
 * text line `CALL <ms>` → call `wait`; `SLOW <ms>` → `slow answer` after that delay; `BASH
 * <command>` → call the built-in `Bash`; anything else → `answer to <line>`.
 */
export const respond: AnthropicServer.Responder = (request) => {
  const lastUser = request.messages.filter((m) => m.role === "user").at(-1)
  const blocks = blocksOf(lastUser?.content)
  const results = blocks.filter((b) => b["type"] === "tool_result")
  // After an interrupted tool call the CLI adds the next prompt to the message holding the
  // rejected tool result: the last block says what is asked.
  if (blocks.at(-1)?.["type"] === "tool_result") {
    return AnthropicServer.reply(
      `FINAL: ${results.map((r) => blocksOf(r["content"]).map((b) => String(b["text"] ?? "")).join("")).join(",")}`
    )
  }
  const texts = blocks.flatMap((b) => typeof b["text"] === "string" ? [b["text"]] : [])
  const line = (texts.at(-1) ?? "").trim().split("\n").at(-1)!.trim()
  const call = /^CALL (\d+)$/.exec(line)
  if (call !== null) return AnthropicServer.callTool("wait", { ms: Number(call[1]) })
  const slow = /^SLOW (\d+)$/.exec(line)
  if (slow !== null) return AnthropicServer.delayed(Number(slow[1]), AnthropicServer.reply("slow answer"))
  const bash = /^BASH (.+)$/.exec(line)
  if (bash !== null) return AnthropicServer.callTool("Bash", { command: bash[1], description: "run it" })
  return AnthropicServer.reply(`answer to ${line}`)
}

/** `CALL: <Tool> <json input>` in the last user message: the model calls that built-in tool. */
export const callModel = () =>
  AnthropicServer.make({
    respond: AnthropicServer.roundTrip(
      (request) => {
        const prompt = AnthropicServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""
        const call = /CALL: (\w+) (.*)$/m.exec(prompt)
        return call === null
          ? AnthropicServer.reply("No call.")
          : AnthropicServer.callTool(call[1]!, JSON.parse(call[2]!))
      },
      (results) => AnthropicServer.reply(`TOOL ${results[0]?.isError === true ? "ERROR" : "OK"}: ${results[0]?.text}`)
    )
  })

export const driverFor = (server: AnthropicServer.AnthropicServer, config: Claude.Config = {}) =>
  Claude.driver({
    binary: claudeBinary,
    env: {
      ANTHROPIC_BASE_URL: server.url,
      ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
      CLAUDE_CODE_MAX_RETRIES: "0"
    },
    ...config
  })

/**
 * A live Claude Code process and its attached session: `driver.live.open`, its files written
 * into a temp clone, spawned with the registration's token under the token variable.
 */
export const spawnLive = (
  driver: Driver.Driver,
  options: {
    readonly extraArgs?: ReadonlyArray<string>
    readonly session?: Driver.SessionRequest
    readonly tools?: ReadonlyArray<string>
  } = {}
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const root = yield* tempRoot
    const reg = yield* registration
    const request = baseRequest(root, reg.url, {
      prompt: "",
      hosted: { key: "tether", url: reg.url, tokenVariable: reg.tokenVariable, tools: options.tools ?? ["wait"] },
      ...(options.session === undefined ? {} : { session: options.session })
    })
    const invocation = yield* driver.live!.open(request)
    for (const file of invocation.files) {
      yield* fs.writeFileString(Path.join(request.profileDir, file.path), file.content, { mode: file.mode ?? 0o600 })
    }
    const proc = yield* LiveChannel.spawn({
      ...invocation,
      args: [...invocation.args, ...(options.extraArgs ?? [])],
      env: { ...invocation.env, [reg.tokenVariable]: Redacted.value(reg.token) }
    })
    const session = yield* driver.live!.attach(proc.channel, LiveChannel.context(request, { hostedToken: reg.token }))
    return { proc, session, request, invocation, root }
  })

/** A running turn: its outputs so far, a wait for a given output, and its end. */
export interface RunningTurn {
  readonly outputs: Array<Driver.Output>
  readonly waitFor: (predicate: (output: Driver.Output) => boolean) => Effect.Effect<Driver.Output>
  /** The outputs, or the failure that ended the stream (with the outputs before it). */
  readonly done: Effect.Effect<
    { readonly outputs: ReadonlyArray<Driver.Output>; readonly failure?: Driver.ProtocolError }
  >
}

export const startTurn = (session: Driver.LiveSession, prompt: string) =>
  Effect.gen(function*() {
    const outputs: Array<Driver.Output> = []
    const waiters: Array<{ predicate: (o: Driver.Output) => boolean; found: Deferred.Deferred<Driver.Output> }> = []
    const fiber = yield* session.turn({ runId: `run-${prompt}`, prompt }).pipe(
      Stream.runForEach((output) =>
        Effect.gen(function*() {
          outputs.push(output)
          for (const waiter of waiters) if (waiter.predicate(output)) yield* Deferred.succeed(waiter.found, output)
        })
      ),
      Effect.either,
      Effect.forkScoped
    )
    const waitFor = (predicate: (output: Driver.Output) => boolean) =>
      Effect.suspend(() => {
        const seen = outputs.find(predicate)
        if (seen !== undefined) return Effect.succeed(seen)
        return Effect.flatMap(Deferred.make<Driver.Output>(), (found) => {
          waiters.push({ predicate, found })
          // A turn that ends (or dies) first fails the wait instead of leaving it hanging.
          return Effect.raceFirst(
            Deferred.await(found),
            Effect.zipRight(Fiber.await(fiber), Effect.dieMessage("the turn ended before the awaited output"))
          )
        })
      })
    const done = Effect.map(Fiber.join(fiber), (either) =>
      Either.isLeft(either) ? { outputs: outputs.slice(), failure: either.left } : { outputs: outputs.slice() })
    return { outputs, waitFor, done } satisfies RunningTurn
  })

export const runTurn = (session: Driver.LiveSession, prompt: string) =>
  Effect.flatMap(startTurn(session, prompt), (turn) => turn.done)

export const terminalOf = (outputs: ReadonlyArray<Driver.Output>): Driver.Terminal => {
  const terminals = outputs.filter((o): o is Driver.Terminal => o._tag === "Terminal")
  if (terminals.length !== 1 || outputs.at(-1) !== terminals[0]) {
    throw new Error(`expected exactly one Terminal, last: ${JSON.stringify(outputs.map((o) => o._tag))}`)
  }
  return terminals[0]!
}

export const messagesOf = (outputs: ReadonlyArray<Driver.Output>): ReadonlyArray<string> =>
  outputs.flatMap((o) => o._tag === "Message" ? [`${o.role}:${o.text}`] : [])

export const isToolStart = (o: Driver.Output) => o._tag === "ToolCall" && o.phase === "start"
export const isSessionStarted = (o: Driver.Output) => o._tag === "SessionStarted"

/** A recorded frame: a line written to stdin (`in`) or read from stdout (`out`). */
export interface Frame {
  readonly dir: "in" | "out"
  readonly line: string
}

/** Writes the frames of a live session as a fixture, when `TETHER_RECORD_CLAUDE_LIVE=1`. */
export const record = (name: string, frames: ReadonlyArray<Frame>) =>
  Effect.sync(() => {
    if (process.env["TETHER_RECORD_CLAUDE_LIVE"] !== "1") return
    Fs.writeFileSync(Path.join(fixtureDir, `${name}.jsonl`), frames.map((f) => JSON.stringify(f)).join("\n") + "\n")
  })

export const readFixture = (name: string): ReadonlyArray<Frame> =>
  Fs.readFileSync(Path.join(fixtureDir, `${name}.jsonl`), "utf8").split("\n").filter((l) => l.trim() !== "").map(
    (l) => JSON.parse(l) as Frame
  )

/** The id a written frame carries (a user line's `uuid`, a control request's `request_id`). */
const idOf = (line: string): string => {
  const frame = JSON.parse(line) as { readonly uuid?: string; readonly request_id?: string }
  return frame.uuid ?? frame.request_id ?? ""
}

/**
 * A channel replaying a recorded session: each write must be the next recorded `in` frame (else
 * the write fails); then the `out` lines recorded up to the following `in` frame are released.
 * `closeInput` releases the rest and ends the lines. `newId` hands out the recorded ids in order.
 */
export const replayChannel = (frames: ReadonlyArray<Frame>) =>
  Effect.gen(function*() {
    const lines = yield* Queue.unbounded<Take.Take<string>>()
    const written: Array<string> = []
    let next = 0
    const release = () => {
      const out: Array<string> = []
      while (next < frames.length && frames[next]!.dir === "out") out.push(frames[next++]!.line)
      if (out.length > 0) Queue.unsafeOffer(lines, Take.chunk(Chunk.fromIterable(out)))
    }
    release()
    const ids = frames.filter((f) => f.dir === "in").map((f) => idOf(f.line))
    let id = 0
    const channel: Driver.Channel = {
      write: (line) =>
        Effect.suspend(() => {
          const expected = frames[next]
          if (expected?.dir !== "in" || expected.line !== line) {
            return Effect.die(new Error(`unexpected write ${line}\nexpected ${expected?.line}`))
          }
          written.push(line)
          next++
          release()
          return Effect.void
        }),
      lines: Stream.flattenTake(Stream.fromQueue(lines)),
      closeInput: Effect.sync(() => {
        while (next < frames.length) {
          if (frames[next]!.dir === "out") Queue.unsafeOffer(lines, Take.of(frames[next]!.line))
          next++
        }
        Queue.unsafeOffer(lines, Take.end)
      })
    }
    return { channel, written, newId: () => ids[id++] ?? "no-more-recorded-ids" }
  })
