/**
 * A live token held by a class instance (a Map, a URL, a Buffer, a Set, an AggregateError's
 * `errors`, an Error inside a plain object) in a driver's failure, a parser's defect or an output
 * never reaches what the host reads: `RunError.cause`, the defect a run dies with, the log, events. A cause is
 * checked in its fields, as `util.inspect` shows it and in its bytes. The provider is `/bin/sh`,
 * printing its own per-process token; the prepare case uses the registration's.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { ProtocolError } from "@tether/core/Driver"
import type * as Event from "@tether/core/Event"
import { Gateway } from "@tether/gateway"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Util from "node:util"

class LineRejected extends Data.TaggedError("LineRejected")<{ readonly seen: Set<string> }> {}

/** The failures a driver may build from the line that carried the token. */
const shapes: Record<string, (token: string) => unknown> = {
  errorWithMap: (t) =>
    Object.assign(new Error("parse failed"), { headers: new Map([["authorization", `Bearer ${t}`]]) }),
  errorWithUrl: (t) => Object.assign(new Error("parse failed"), { endpoint: new URL(`http://127.0.0.1:1/mcp?k=${t}`) }),
  errorWithBuffer: (t) => Object.assign(new Error("parse failed"), { line: Buffer.from(`LEAK ${t}`) }),
  aggregateError: (t) => new AggregateError([new Error(`bad line ${t}`)], "parse failed"),
  plainObjectHoldingError: (t) => ({ message: "parse failed", error: new Error(`bad line ${t}`) }),
  taggedErrorWithSet: (t) => new LineRejected({ seen: new Set([t]) }),
  errorWithHiddenField: (t) =>
    Object.defineProperty(new Error("parse failed"), "line", { value: t, enumerable: false }),
  errorWithBytesInMap: (t) => Object.assign(new Error("parse failed"), { parts: new Map([["line", Buffer.from(t)]]) }),
  // No message at all (against the type): once a crash of the run's end instead of a RunError.
  objectWithoutMessage: (t) => ({ line: t }),
  // Scrubbed by the field walk alone.
  errorWithString: (t) => Object.assign(new Error("parse failed"), { line: `LEAK ${t}` }),
  protocolError: (t) => new ProtocolError({ reason: "MalformedOutput", detail: `bad line ${t}` })
}

const script = [
  `TOKEN="$TOKEN_VALUE"`,
  `echo '{"_tag":"SessionStarted","sessionId":"s-1","model":"m"}'`,
  `printf 'LEAK %s\\n' "$TOKEN"`,
  `echo '{"_tag":"Terminal","ok":true,"text":"done","model":"m","session":"s-1"}'`
].join("\n")

/**
 * Everything a host could read of a value: util.inspect (hidden fields too), JSON, and the bytes
 * of any typed array anywhere in it (through every own property, map and set entry).
 */
const holds = (value: unknown, token: string): boolean => {
  const inspected = Util.inspect(value, { depth: Infinity, showHidden: true, maxStringLength: Infinity })
  let json = ""
  try {
    json = JSON.stringify(value) ?? ""
  } catch {
    json = ""
  }
  const needle = Buffer.from(token)
  const seen = new Set<unknown>()
  const inBytes = (v: unknown): boolean => {
    if (typeof v !== "object" || v === null || seen.has(v)) return false
    seen.add(v)
    if (ArrayBuffer.isView(v)) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).includes(needle)
    if (v instanceof Map) return [...v].some(([key, entry]) => inBytes(key) || inBytes(entry))
    if (v instanceof Set) return [...v].some(inBytes)
    return Reflect.ownKeys(v).some((key) => inBytes((v as { readonly [key: PropertyKey]: unknown })[key]))
  }
  return inspected.includes(token) || json.includes(token) || inBytes(value)
}

describe("a token in a non-plain value of a driver's failure", () => {
  it.live("reaches neither RunError.cause, nor the defect a run dies with, nor the log", () => {
    const observed: Array<Harness.Observed> = []
    const state = { mode: "", token: "" }
    const base = Reference.driver()
    const driver: Driver.Driver = {
      ...base,
      prepare: (request) =>
        state.mode === "prepare"
          ? Effect.fail(
            Object.assign(new Error("prepare failed"), {
              endpoint: new URL(`${request.hosted.url}?k=${Redacted.value(observed[0]!.token)}`)
            }) as unknown as ProtocolError
          )
          : Effect.map(base.prepare(request), (invocation) => ({
            ...invocation,
            command: "/bin/sh",
            args: ["-c", script.replace("$TOKEN_VALUE", `$${request.hosted.tokenVariable}`)],
            stdin: undefined
          })),
      parse: (lines) =>
        lines.pipe(Stream.mapEffect((line): Effect.Effect<Driver.Output, ProtocolError> => {
          if (!line.startsWith("LEAK ")) return Effect.succeed(JSON.parse(line) as Driver.Output)
          const token = line.slice(5)
          state.token = token
          if (state.mode === "notice" || state.mode === "noticeBytes") {
            return Effect.succeed({
              _tag: "Notice",
              level: "info",
              kind: "env",
              message: "a line",
              raw: new Map<string, unknown>([["line", state.mode === "notice" ? token : Buffer.from(token)]])
            })
          }
          if (state.mode === "defect") {
            return Effect.sync(() => {
              throw new Error(`bad line ${token}`)
            })
          }
          return Effect.fail(shapes[state.mode]!(token) as ProtocolError)
        }))
    }
    const logged: Array<string> = []
    const logger = Logger.make(({ cause, message }) => {
      logged.push(`${Util.inspect(message, { depth: Infinity })}\n${Cause.pretty(cause, { renderErrorCause: true })}`)
    })
    return Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const agent = yield* Agent.make({
        driver,
        definition: { instructions: "", skills: [], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      const leaked: Record<string, boolean> = {}
      for (const mode of Object.keys(shapes)) {
        state.mode = mode
        state.token = ""
        const error = yield* Effect.flip(agent.run("go"))
        expect(error._tag).toBe("RunError")
        const runError = error as Extract<typeof error, { _tag: "RunError" }>
        expect(state.token).toMatch(/^[A-Za-z0-9_-]{43}$/)
        expect(runError.detail.includes(state.token)).toBe(false)
        leaked[mode] = holds(runError.cause, state.token)
      }
      // Prepare: the registration token (live for the agent's life) in a URL field.
      state.mode = "prepare"
      const prepared = yield* Effect.flip(agent.run("go"))
      const registrationToken = Redacted.value(observed[0]!.token)
      expect(prepared._tag === "RunError" && prepared.reason).toBe("PrepareFailed")
      leaked["prepare:errorWithUrl"] = holds((prepared as { cause?: unknown }).cause, registrationToken)
      // A parser's defect: the host's exit holds the original error; the log line is scrubbed.
      state.mode = "defect"
      const died = yield* Effect.exit(agent.run("go"))
      expect(Exit.isFailure(died) && Cause.isDie(died.cause)).toBe(true)
      leaked["defect:exit"] = Exit.isFailure(died) && holds(Cause.squash(died.cause), state.token)
      expect(logged.some((line) => line.includes("bad line") && line.includes(Gateway.redactionMarker))).toBe(true)
      leaked["defect:log"] = logged.some((line) => line.includes(state.token))
      // A driver's Notice whose raw is a Map (not JSON a parser made), holding the token as text
      // or as bytes.
      for (const mode of ["notice", "noticeBytes"]) {
        state.mode = mode
        const events: Array<Event.Event> = []
        yield* agent.stream("go").pipe(Stream.runForEach((event) => Effect.sync(() => events.push(event))))
        const notice = events.find((event) => event._tag === "Notice")
        expect(notice).toBeDefined()
        leaked[`${mode}:raw`] = holds(notice, state.token)
      }
      expect(Object.entries(leaked).filter(([, did]) => did).map(([mode]) => mode)).toEqual([])
      expect(Object.keys(leaked)).toHaveLength(Object.keys(shapes).length + 5)
    }).pipe(
      Effect.scoped,
      Effect.provide([Harness.recordingLayer(observed), Logger.replace(Logger.defaultLogger, logger)])
    )
  }, 120_000)
})
