/**
 * The live Codex protocol without the binary: the recorded frames of one real app-server session
 * (`fixtures/codex-live/session.frames.json` both ways, `session.jsonl` its stdout; recorded by
 * `CodexLive.test.ts` with `RECORD_CODEX_LIVE=1`) replayed through `Codex.parseLive` and through a live session attached to
 * a channel that answers each written frame with the recorded lines that followed it; then
 * hand-made transcripts for what a recording rarely shows (errors, requests, exits).
 */
import { describe, expect, it } from "@effect/vitest"
import * as Driver from "@tether/core/Driver"
import { Codex } from "@tether/drivers"
import { LiveChannel } from "@tether/testing"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as CodexLiveParse from "../src/internal/codexLiveParse.js"
import * as StrictSchema from "../src/internal/strictSchema.js"
import * as OneEdit from "./OneEdit.js"

interface Frame {
  readonly dir: "in" | "out" | "exit"
  readonly line: string
}

const fixtures = Path.join(import.meta.dirname, "fixtures", "codex-live")
/** Every frame of the recorded session, both ways, in order. */
const recorded = JSON.parse(Fs.readFileSync(Path.join(fixtures, "session.frames.json"), "utf8")) as ReadonlyArray<Frame>
/** The recorded session's stdout alone (also the fuzz harness's seed). */
const stdout = Fs.readFileSync(Path.join(fixtures, "session.jsonl"), "utf8").split("\n").filter((l) => l.length > 0)

const context: Driver.ParseContext = { hostedKey: "tether", session: { _tag: "New", id: "x" } }

/** What core gives `attach` for a process of `parse`'s session (no files, no hosted tools used). */
const liveContext = (parse: Driver.ParseContext): Driver.LiveContext =>
  LiveChannel.context({
    runId: "r",
    prompt: "",
    model: undefined,
    profileDir: "/nonexistent",
    siblings: {},
    workspace: "/nonexistent",
    hosted: { key: parse.hostedKey, url: "http://127.0.0.1:1/mcp", tokenVariable: "TETHER_TOKEN", tools: [] },
    instructions: "",
    skills: [],
    mcp: [],
    session: parse.session,
    sandbox: undefined,
    hostEnv: {}
  })
const prompts = ["first: remember BANANA", "second: [tool] please", "third: [think] what word?"]

/**
 * A channel that plays a transcript: each frame the session writes must equal the next `in`
 * frame (as JSON); the `out` frames after it are then read by the session; `exit` ends stdout.
 */
const replay = (frames: ReadonlyArray<Frame>) =>
  Effect.gen(function*() {
    const out = yield* Queue.unbounded<Option.Option<string>>()
    const written: Array<unknown> = []
    let cursor = 0
    const release = Effect.gen(function*() {
      while (cursor < frames.length && frames[cursor]!.dir !== "in") {
        const frame = frames[cursor++]!
        yield* Queue.offer(out, frame.dir === "exit" ? Option.none() : Option.some(frame.line))
      }
    })
    yield* release
    const channel: Driver.Channel = {
      write: (line) =>
        Effect.suspend(() => {
          const message = JSON.parse(typeof line === "string" ? line : line.text) as unknown
          written.push(message)
          const expected = frames[cursor]
          if (expected?.dir !== "in") return Effect.die(new Error(`unexpected frame ${line}`))
          expect(message).toEqual(JSON.parse(expected.line))
          cursor++
          return release
        }),
      lines: Stream.fromQueue(out).pipe(Stream.takeWhile(Option.isSome), Stream.map((line) => line.value)),
      closeInput: Queue.offer(out, Option.none())
    }
    return { channel, written }
  })

const collect = (stream: Stream.Stream<Driver.Output, Driver.ProtocolError>) =>
  Stream.runCollect(stream).pipe(Effect.map(Chunk.toReadonlyArray))

const live = Codex.driver().live!

const terminals = (outputs: ReadonlyArray<Driver.Output>) =>
  outputs.filter((o): o is Driver.Terminal => o._tag === "Terminal")

const line = (message: object): Frame => ({ dir: "out", line: JSON.stringify(message) })
const sent = (message: object): Frame => ({ dir: "in", line: JSON.stringify(message) })

/** The opening of a hand-made session: initialize, thread/start, one turn/start answered. */
const opening = (prompt: string): ReadonlyArray<Frame> => [
  sent({
    id: 1,
    method: "initialize",
    params: {
      clientInfo: { name: "tether", title: "Tether", version: "0.1.0" },
      capabilities: {
        experimentalApi: false,
        requestAttestation: false,
        optOutNotificationMethods: ["account/rateLimits/updated", "thread/readState/changed"]
      }
    }
  }),
  line({ id: 1, result: {} }),
  sent({ method: "initialized" }),
  sent({ id: 2, method: "thread/start", params: { approvalPolicy: "never" } }),
  line({ id: 2, result: { thread: { id: "T" }, model: "m" } }),
  sent({
    id: 3,
    method: "turn/start",
    params: { threadId: "T", input: [{ type: "text", text: prompt, text_elements: [] }] }
  }),
  line({ id: 3, result: { turn: { id: "U1", status: "inProgress" } } })
]

/** The stdout lines of a hand-made transcript. */
const stdoutOf = (frames: ReadonlyArray<Frame>): ReadonlyArray<string> =>
  frames.filter((frame) => frame.dir === "out").map((frame) => frame.line)

const completed = (turn: string, status: string, extra: object = {}) =>
  line({ method: "turn/completed", params: { threadId: "T", turn: { id: turn, status, error: null, ...extra } } })

describe("Codex live protocol (recorded and hand-made transcripts)", () => {
  it.effect("parseLive maps the recorded session to SessionStarted and three turns", () =>
    Effect.gen(function*() {
      expect(stdout).toEqual(recorded.filter((f) => f.dir === "out").map((f) => f.line))
      const outputs = yield* collect(Codex.parseLive(Stream.fromIterable(stdout), context))
      expect(outputs[0]).toMatchObject({ _tag: "SessionStarted", model: "fake-model" })
      expect(terminals(outputs).map((t) => [t.ok, t.text])).toEqual([
        [true, "answer 0"],
        [true, "FINAL echoed"],
        [true, "answer 3"]
      ])
      expect(outputs.filter((o) => o._tag === "ToolCall")).toEqual([
        expect.objectContaining({ phase: "start", name: "echo", source: "host", input: { text: "warm" } }),
        expect.objectContaining({ phase: "end", name: "echo", source: "host", isError: false })
      ])
      expect(outputs.filter((o) => o._tag === "Usage").map((o) => o.usage.inputTokens)).toEqual([10, 30, 40])
      expect(outputs.filter((o) => o._tag === "ReasoningDelta")).toEqual([
        { _tag: "ReasoningDelta", text: "weighing the word" }
      ])
      expect(outputs.filter((o) => o._tag === "Notice").map((o) => o.message)).toEqual([
        expect.stringContaining("Model metadata for `fake-model` not found"),
        expect.stringContaining("Model metadata for `fake-model` not found"),
        expect.stringContaining("Model metadata for `fake-model` not found")
      ])
    }))

  it.effect("a live session replaying the recording writes the same frames and yields what parseLive yields", () =>
    Effect.gen(function*() {
      const { channel } = yield* replay(recorded)
      const session = yield* live.attach(channel, liveContext(context))
      const outputs: Array<Driver.Output> = []
      for (const prompt of prompts) outputs.push(...yield* collect(session.turn({ runId: "r", prompt })))
      expect(outputs).toEqual(yield* collect(Codex.parseLive(Stream.fromIterable(stdout), context)))
      expect(terminals(outputs)).toHaveLength(3)
    }).pipe(Effect.scoped))

  it.effect("an interrupted turn ends with ok:false; frames of another turn and unknown methods do not mix in", () =>
    Effect.gen(function*() {
      const { channel } = yield* replay([
        ...opening("go"),
        line({ method: "item/agentMessage/delta", params: { threadId: "T", turnId: "U0", itemId: "x", delta: "old" } }),
        line({ method: "item/agentMessage/delta", params: { threadId: "T", turnId: "U1", itemId: "m", delta: "new" } }),
        line({ method: "some/futureNotification", params: { threadId: "T" } }),
        { dir: "out", line: "not json at all" },
        completed("U1", "interrupted")
      ])
      const session = yield* live.attach(channel, liveContext(context))
      const outputs = yield* collect(session.turn({ runId: "r", prompt: "go" }))
      expect(outputs.map((o) => o._tag)).toEqual(["SessionStarted", "TextDelta", "Notice", "Notice", "Terminal"])
      expect(outputs[1]).toEqual({ _tag: "TextDelta", text: "new" })
      expect(outputs[2]).toMatchObject({ kind: "unknown/some/futureNotification" })
      expect(outputs[3]).toMatchObject({ kind: "malformed" })
      expect(outputs[4]).toMatchObject({ ok: false, error: "the turn was interrupted", session: "T" })
    }).pipe(Effect.scoped))

  it.effect("a turn's outputSchema goes with its turn/start only, strict; its completed terminal carries the value", () =>
    Effect.gen(function*() {
      const schema = {
        type: "object",
        properties: { a: { type: "string" }, b: { type: "string" } },
        required: ["a"],
        additionalProperties: false
      }
      const turnStart = (id: number, prompt: string, withSchema: boolean) =>
        sent({
          id,
          method: "turn/start",
          params: {
            threadId: "T",
            input: [{ type: "text", text: prompt, text_elements: [] }],
            ...(withSchema ? { outputSchema: StrictSchema.strict(schema) } : {})
          }
        })
      const message = (turn: string, text: string) =>
        line({
          method: "item/completed",
          params: { threadId: "T", turnId: turn, item: { type: "agentMessage", id: `m-${turn}`, text } }
        })
      const { channel } = yield* replay([
        ...opening("").slice(0, 5),
        turnStart(3, "one", true),
        line({ id: 3, result: { turn: { id: "U1", status: "inProgress" } } }),
        message("U1", `{"a":"x","b":null}`),
        completed("U1", "completed"),
        turnStart(4, "two", true),
        line({ id: 4, result: { turn: { id: "U2", status: "inProgress" } } }),
        message("U2", `{"a":"y","b":null}`),
        completed("U2", "interrupted"),
        turnStart(5, "three", false),
        line({ id: 5, result: { turn: { id: "U3", status: "inProgress" } } }),
        message("U3", `{"a":"z","b":null}`),
        completed("U3", "completed")
      ])
      const session = yield* live.attach(channel, liveContext(context))
      const one = terminals(yield* collect(session.turn({ runId: "r1", prompt: "one", outputSchema: schema })))
      const two = terminals(yield* collect(session.turn({ runId: "r2", prompt: "two", outputSchema: schema })))
      const three = terminals(yield* collect(session.turn({ runId: "r3", prompt: "three" })))
      // The strict form's null is read back as the absent optional property.
      expect(one[0]).toMatchObject({ ok: true, structuredOutput: { _tag: "Value", value: { a: "x" } } })
      // An interrupted turn, and a plain one, report none.
      expect(two[0]).toMatchObject({ ok: false })
      expect(two[0]!.structuredOutput).toBeUndefined()
      expect(three[0]).toMatchObject({ ok: true, text: `{"a":"z","b":null}` })
      expect(three[0]!.structuredOutput).toBeUndefined()
    }).pipe(Effect.scoped))

  it.effect("a server request is answered at once (declined, same id) and reported as a Notice", () =>
    Effect.gen(function*() {
      const request = {
        id: 0,
        method: "item/commandExecution/requestApproval",
        params: { threadId: "T", turnId: "U1", itemId: "c1", command: "rm -rf /" }
      }
      const { channel, written } = yield* replay([
        ...opening("go"),
        line(request),
        sent({ id: 0, result: { decision: "decline" } }),
        line({ id: 7, method: "account/chatgptAuthTokens/refresh", params: {} }),
        sent({ id: 7, error: { code: -32601, message: "Tether does not answer account/chatgptAuthTokens/refresh" } }),
        completed("U1", "completed")
      ])
      const session = yield* live.attach(channel, liveContext(context))
      const outputs = yield* collect(session.turn({ runId: "r", prompt: "go" }))
      expect(written.at(-2)).toEqual({ id: 0, result: { decision: "decline" } })
      expect(outputs.filter((o) => o._tag === "Notice")).toEqual([
        expect.objectContaining({ kind: "approval", message: expect.stringContaining("declined") }),
        expect.objectContaining({ kind: "server_request" })
      ])
      expect(terminals(outputs)).toEqual([expect.objectContaining({ ok: true })])
    }).pipe(Effect.scoped))

  it.effect("stdout closing mid-turn fails the turn after its outputs; the next turn fails at once", () =>
    Effect.gen(function*() {
      const { channel } = yield* replay([
        ...opening("go"),
        line({
          method: "item/agentMessage/delta",
          params: { threadId: "T", turnId: "U1", itemId: "m", delta: "part" }
        }),
        { dir: "exit", line: "" }
      ])
      const session = yield* live.attach(channel, liveContext(context))
      const outputs: Array<Driver.Output> = []
      const result = yield* session.turn({ runId: "r", prompt: "go" }).pipe(
        Stream.runForEach((o) => Effect.sync(() => outputs.push(o))),
        Effect.either
      )
      expect(outputs.map((o) => o._tag)).toEqual(["SessionStarted", "TextDelta"])
      expect(Either.isLeft(result) && result.left).toBeInstanceOf(Driver.ProtocolError)
      expect(Either.isLeft(result) && result.left.detail).toContain("exited")
      const next = yield* Effect.either(collect(session.turn({ runId: "r", prompt: "again" })))
      expect(Either.isLeft(next) && next.left.reason).toBe("ProviderError")
    }).pipe(Effect.scoped))

  it.effect("JSON-RPC errors: an unknown thread is ResumeRejected; others keep the server's message", () =>
    Effect.gen(function*() {
      const resume: Driver.ParseContext = { hostedKey: "tether", session: { _tag: "Resume", id: "gone" } }
      const [initialize, answer, initialized] = opening("go")
      const { channel } = yield* replay([
        initialize!,
        answer!,
        initialized!,
        sent({
          id: 2,
          method: "thread/resume",
          params: { threadId: "gone", approvalPolicy: "never", excludeTurns: true }
        }),
        line({ id: 2, error: { code: -32600, message: "no rollout found for thread id gone" } })
      ])
      const rejected = yield* Effect.either(live.attach(channel, liveContext(resume)))
      expect(Either.isLeft(rejected) && rejected.left.reason).toBe("ResumeRejected")

      const other = yield* replay([
        ...opening("go").slice(0, 4),
        line({ id: 2, error: { code: -32600, message: "failed to load configuration: nope" } })
      ])
      const failed = yield* Effect.either(live.attach(other.channel, liveContext(context)))
      expect(Either.isLeft(failed) && failed.left).toMatchObject({
        reason: "ProviderError",
        detail: "Codex rejected thread/start: failed to load configuration: nope"
      })

      // A resume answered with another thread is rejected, as the one-shot parser does.
      const parsed = yield* Effect.either(collect(Codex.parseLive(
        Stream.make(JSON.stringify({ id: 2, result: { thread: { id: "other" } } })),
        resume
      )))
      expect(Either.isLeft(parsed) && parsed.left.reason).toBe("ResumeRejected")
    }).pipe(Effect.scoped))
})

describe("Codex's live parser reads a plain agent-message delta without JSON.parse, as JSON.parse reads it", () => {
  const delta = (turnId: string, text: string, emittedAtMs: number | undefined) =>
    JSON.stringify({
      method: "item/agentMessage/delta",
      params: { threadId: "T", turnId, itemId: "msg_1", delta: text },
      ...(emittedAtMs === undefined ? {} : { emittedAtMs })
    })
  // The session's stdout before the line: its thread, then its turn U1.
  const opened = stdoutOf(opening("go"))

  it.effect.prop(
    "in a session's stdout: any delta, and any line one edit away from one, gives what JSON.parse reads",
    [
      FastCheck.constantFrom("U1", "U0"),
      FastCheck.string({ unit: "binary" }),
      FastCheck.option(FastCheck.nat(), { nil: undefined }),
      OneEdit.edits
    ],
    ([turnId, text, emittedAtMs, edits]) =>
      Effect.gen(function*() {
        const edited = OneEdit.edited(delta(turnId, text, emittedAtMs), edits)
        const r = OneEdit.parsedRecord(edited)
        const params = r === "non_json" || r === undefined ? undefined : r["params"]
        const outputs = (yield* collect(Codex.parseLive(Stream.fromIterable([...opened, edited]), context))).slice(1)
        if (r === "non_json") {
          expect(outputs).toMatchObject([{ _tag: "Notice", kind: "malformed" }])
          return
        }
        if (
          r === undefined || r["method"] !== "item/agentMessage/delta" || "id" in r || typeof params !== "object" ||
          params === null || Array.isArray(params)
        ) return
        const fields = params as { readonly turnId?: unknown; readonly delta?: unknown }
        const mine = typeof fields.turnId !== "string" || fields.turnId === "U1"
        expect(outputs).toEqual(
          mine && typeof fields.delta === "string" && fields.delta.length > 0
            ? [{ _tag: "TextDelta", text: fields.delta }]
            : []
        )
      }),
    { fastCheck: { numRuns: 300 } }
  )

  it("a backslash before any of its strings' closing quote: not JSON (the pattern must not end the string there)", () => {
    const plain = delta("U1", "d", 1)
    for (const field of ["T", "U1", "msg_1", "d"]) {
      const at = plain.indexOf(`"${field}"`) + field.length + 1
      const line = `${plain.slice(0, at)}\\${plain.slice(at)}`
      expect(OneEdit.parsedRecord(line)).toBe("non_json")
      expect(CodexLiveParse.decode(line)).toMatchObject({ _tag: "Malformed", reason: "a stdout line is not JSON" })
    }
  })

  it.prop(
    "a live session's frame of any such line is the frame of its JSON",
    [
      FastCheck.constantFrom("U1", "U0"),
      FastCheck.string({ unit: "binary" }),
      FastCheck.option(FastCheck.nat(), { nil: undefined }),
      OneEdit.edits
    ],
    ([turnId, text, emittedAtMs, edits]) => {
      const edited = OneEdit.edited(delta(turnId, text, emittedAtMs), edits)
      const r = OneEdit.parsedRecord(edited)
      const frame = CodexLiveParse.decode(edited)
      if (edited.trim() === "") {
        expect(frame).toBeUndefined()
        return
      }
      if (r === "non_json") {
        expect(frame).toMatchObject({ _tag: "Malformed", reason: "a stdout line is not JSON" })
        return
      }
      if (r === undefined || typeof r["method"] !== "string" || "id" in r) return
      expect(frame).toEqual({ _tag: "Notification", method: r["method"], params: r["params"] })
    },
    { fastCheck: { numRuns: 300 } }
  )
})
