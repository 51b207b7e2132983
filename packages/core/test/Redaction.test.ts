/**
 * What a run emits or persists never carries a live gateway token, and its errors say why.
 * The provider is a real `/bin/sh` process (a driver built on the reference driver's protocol:
 * one `Driver.Output` as JSON per line) that prints its own token, as a CLI's shell tool can.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import type * as Event from "@tether/core/Event"
import { Raw } from "@tether/core/Result"
import { Gateway } from "@tether/gateway"
import { Harness, Reference } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Equal from "effect/Equal"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"

const Noop = Tool.make("noop", {
  description: "Does nothing.",
  input: {},
  output: Schema.Struct({ ok: Schema.Boolean }),
  revision: "noop/v1"
})
const Tools = Toolkit.make(Noop)
const ToolsLive = Tools.toLayer({ noop: () => Effect.succeed({ ok: true }) })

/** A driver whose provider process is `sh -c <script>`; `$TOKEN` in the script is its gateway token. */
const shell = (script: string, extra: Partial<Driver.Driver> = {}): Driver.Driver => {
  const base = Reference.driver()
  return {
    ...base,
    ...extra,
    prepare: (request) =>
      Effect.map(base.prepare(request), (invocation) => ({
        ...invocation,
        command: "/bin/sh",
        args: ["-c", `TOKEN="$${request.hosted.tokenVariable}"\n${script}`],
        stdin: undefined
      }))
  }
}

const runWith = <A>(
  driver: Driver.Driver,
  body: (
    agent: Agent.Agent,
    sandbox: Harness.Sandbox,
    observed: ReadonlyArray<Harness.Observed>
  ) => Effect.Effect<A, unknown>,
  limits?: Agent.Options<typeof Tools>["limits"]
) => {
  const observed: Array<Harness.Observed> = []
  return Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const value = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver,
        definition: { instructions: "", skills: [], tools: Tools },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        ...(limits === undefined ? {} : { limits })
      })
      return yield* body(agent, sandbox, observed)
    }).pipe(Effect.scoped)
    return { value, observed, sandbox }
  }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.recordingLayer(observed)]))
}

const marker = Gateway.redactionMarker

/** A run's events, after which `keep` gets the token the shell CLI wrote to `captured`. */
const streamed = (agent: Agent.Agent, sandbox: Harness.Sandbox, keep: (token: string) => void) =>
  Effect.gen(function*() {
    const events: Array<Event.Event> = []
    yield* agent.stream("go").pipe(Stream.runForEach((event) => Effect.sync(() => events.push(event))))
    keep(Fs.readFileSync(Path.join(sandbox.workspace, "captured"), "utf8"))
    return events
  })

describe("Redaction of live tokens", () => {
  it.live("events, deltas split inside the token, Result and raw output carry the marker, never the token", () => {
    let captured = ""
    return runWith(
      shell(
        [
          // The token as a child of the CLI sees it, kept by the test to probe it afterwards.
          `printf '%s' "$TOKEN" > "$PWD/captured"`,
          `A=$(printf '%s' "$TOKEN" | cut -c1-20); B=$(printf '%s' "$TOKEN" | cut -c21-)`,
          `echo '{"_tag":"SessionStarted","sessionId":"s-1","model":"m"}'`,
          `printf '{"_tag":"TextDelta","text":"env=%s"}\\n' "$A"`,
          `printf '{"_tag":"TextDelta","text":"%s;"}\\n' "$B"`,
          `printf '{"_tag":"ToolCall","phase":"start","callId":"c","name":"env","source":"builtin","input":{"%s":["%s"]}}\\n' "$TOKEN" "$TOKEN"`,
          `printf '{"_tag":"Notice","level":"info","kind":"env","message":"%s","raw":{"v":"%s"}}\\n' "$TOKEN" "$TOKEN"`,
          `printf '{"_tag":"Message","role":"assistant","text":"env=%s;"}\\n' "$TOKEN"`,
          `echo "stderr saw $TOKEN" >&2`,
          // Let the stderr reader take it before the terminal record builds the result.
          `sleep 0.3`,
          `printf '{"_tag":"Terminal","ok":true,"text":"env=%s;","model":"m","session":"s-1","raw":{"t":"%s"}}\\n' "$TOKEN" "$TOKEN"`
        ].join("\n")
      ),
      (agent, sandbox) => streamed(agent, sandbox, (token) => (captured = token))
    ).pipe(
      Effect.tap(({ value: events, observed }) =>
        Effect.gen(function*() {
          expect(captured).toMatch(/^[A-Za-z0-9_-]{43}$/)
          const everything = JSON.stringify(events)
          expect(everything.includes(captured)).toBe(false)
          // No delta carries a piece of the token long enough to matter.
          for (const event of events) {
            if (event._tag === "TextDelta") expect(event.text.includes(captured.slice(0, 8))).toBe(false)
          }
          const deltas = events.flatMap((e) => e._tag === "TextDelta" ? [e.text] : []).join("")
          expect(deltas).toBe(`env=${marker};`)
          const finished = events.at(-1)
          expect(finished?._tag).toBe("RunFinished")
          const result = finished?._tag === "RunFinished" ? finished.result : undefined
          expect(result?.text).toBe(`env=${marker};`)
          expect(result?.raw.stderr).toContain(`stderr saw ${marker}`)
          expect(result?.raw.stdout).toContain(marker)
          expect(JSON.stringify(result?.raw.terminal)).toContain(marker)
          const call = events.find((e): e is Event.ToolCall => e._tag === "ToolCall")
          expect(call?.input).toEqual({ [marker]: [marker] })
          // The process ran on its own credential, not on the registration's token.
          expect(captured).not.toBe(Redacted.value(observed[0]!.token))
        })
      )
    )
  })

  it.live("raw stdout is the tail, scrubbed: a token cut by the tail's start or split between reads is replaced; clean output reads as written", () => {
    const terminal = `{"_tag":"Terminal","ok":true,"text":"done","model":"m","session":"s-1","raw":{}}`
    const maxRawBytes = 300
    // The tail's start falls 20 characters before the token's end.
    const after = maxRawBytes - 20
    const padding = " ".repeat(after - 1 - (terminal.length + 1))
    const captured = (sandbox: Harness.Sandbox) => Fs.readFileSync(Path.join(sandbox.workspace, "captured"), "utf8")
    const keep = `printf '%s' "$TOKEN" > "$PWD/captured"`
    const cut = runWith(
      shell([keep, `printf 'x=%s${padding}\n' "$TOKEN"`, `echo '${terminal}'`].join("\n")),
      (agent, sandbox) => Effect.map(agent.run("go"), (result) => ({ result, token: captured(sandbox) })),
      { maxRawBytes }
    )
    const split = runWith(
      shell([
        keep,
        `A=$(printf '%s' "$TOKEN" | cut -c1-20); B=$(printf '%s' "$TOKEN" | cut -c21-)`,
        // Two writes a pause apart: two reads, the token across them, far from either edge.
        `printf '{"_tag":"TextDelta","text":"${"-".repeat(60)} %s' "$A"`,
        `sleep 0.3`,
        `printf '%s ${"-".repeat(60)}"}\n' "$B"`,
        `echo '${terminal}'`
      ].join("\n")),
      (agent, sandbox) => Effect.map(agent.run("go"), (result) => ({ result, token: captured(sandbox) }))
    )
    const clean = runWith(
      shell([`printf '{"_tag":"TextDelta","text":"héllo 😀"}\n'`, `echo '${terminal}'`].join("\n")),
      (agent) => agent.run("go")
    )
    return Effect.gen(function*() {
      const { value: { result: cutResult, token } } = yield* cut
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/)
      expect(cutResult.raw.stdout.startsWith(marker)).toBe(true)
      expect(cutResult.raw.stdout.includes(token.slice(-20, -4))).toBe(false)
      expect(cutResult.raw.stdout.endsWith(`${terminal}\n`)).toBe(true)

      const { value: { result: splitResult, token: splitToken } } = yield* split
      expect(splitResult.raw.stdout).toContain(` ${marker} `)
      expect(splitResult.raw.stdout.includes(splitToken)).toBe(false)

      const { value: cleanResult } = yield* clean
      const written = `{"_tag":"TextDelta","text":"héllo 😀"}\n${terminal}\n`
      // Nothing to scrub: the tail is decoded when it is first read, and reads as any field does.
      expect(Object.getOwnPropertyDescriptor(cleanResult.raw, "stdout")?.get).toBeDefined()
      expect(cleanResult.raw.stdout).toBe(written)
      expect(Object.getOwnPropertyDescriptor(cleanResult.raw, "stdout")?.value).toBe(written)
      const plain = new Raw({
        stdout: written,
        stderr: cleanResult.raw.stderr,
        stdoutBytes: Buffer.byteLength(written),
        stderrBytes: cleanResult.raw.stderrBytes,
        terminal: cleanResult.raw.terminal
      })
      expect(Equal.equals(cleanResult.raw, plain)).toBe(true)
      expect(JSON.parse(JSON.stringify(cleanResult.raw))).toEqual(JSON.parse(JSON.stringify(plain)))
      expect(Schema.encodeSync(Raw)(cleanResult.raw)).toEqual(Schema.encodeSync(Raw)(plain))
    })
  })

  it.live("a held-back delta keeps its place: reasoning ending like a token's start still comes before the next text", () =>
    runWith(
      shell([
        // Each delta ends with the token's first character, so each could be a token's start.
        `C=$(printf '%s' "$TOKEN" | cut -c1)`,
        `printf '{"_tag":"ReasoningDelta","text":"think%s"}\\n' "$C"`,
        `printf '{"_tag":"TextDelta","text":"Hel%s"}\\n' "$C"`,
        `printf '{"_tag":"ReasoningDelta","text":"more%s"}\\n' "$C"`,
        `printf '{"_tag":"Terminal","ok":true,"text":"done","model":"m","session":"s-1","raw":{}}\\n'`
      ].join("\n")),
      (agent) =>
        Effect.gen(function*() {
          const events: Array<Event.Event> = []
          yield* agent.stream("go").pipe(Stream.runForEach((event) => Effect.sync(() => events.push(event))))
          return events.flatMap((e) =>
            e._tag === "TextDelta" || e._tag === "ReasoningDelta" ? [`${e._tag}:${e.text}`] : []
          )
        })
    ).pipe(
      Effect.tap(({ value: deltas }) =>
        Effect.sync(() => {
          // Whatever the split, the kinds come in the order the CLI wrote them, nothing lost.
          const kinds = deltas.map((d) => d.split(":")[0]).filter((k, i, all) => i === 0 || all[i - 1] !== k)
          expect(kinds).toEqual(["ReasoningDelta", "TextDelta", "ReasoningDelta"])
          const text = deltas.map((d) => d.slice(d.indexOf(":") + 1)).join("")
          expect(text).toMatch(/^think.Hel.more.$/)
        })
      )
    ))

  it.live("a token cut by the edge of a Notice's bounded quote of a line (its message, a string raw) is replaced", () => {
    let captured = ""
    return runWith(
      shell([
        `printf '%s' "$TOKEN" > "$PWD/captured"`,
        `echo '{"_tag":"SessionStarted","sessionId":"s-1","model":"m"}'`,
        // A line that is not the protocol: the reference driver quotes its first 200 characters,
        // the token's first 20 among them.
        `printf '%s%s and more\\n' "$(printf '%180s' '' | tr ' ' '.')" "$TOKEN"`,
        // A driver's own quote of a line cut at 4096 characters (Claude's, Codex's `raw`), the
        // token's first 42 kept; and one cut by its start, the token's last 30 kept.
        `HEAD=$(printf '%s' "$TOKEN" | cut -c1-42); TAIL=$(printf '%s' "$TOKEN" | cut -c14-)`,
        `printf '{"_tag":"Notice","level":"warning","kind":"malformed","message":"not JSON","raw":"%s%s"}\\n' "$(printf '%4054s' '' | tr ' ' '.')" "$HEAD"`,
        `printf '{"_tag":"Notice","level":"warning","kind":"cut","message":"%s rest"}\\n' "$TAIL"`,
        `echo '{"_tag":"Terminal","ok":true,"text":"done","model":"m","session":"s-1","raw":{}}'`
      ].join("\n")),
      (agent, sandbox) => streamed(agent, sandbox, (token) => (captured = token))
    ).pipe(
      Effect.tap(({ value: events }) =>
        Effect.sync(() => {
          expect(captured).toMatch(/^[A-Za-z0-9_-]{43}$/)
          expect(events.at(-1)?._tag).toBe("RunFinished")
          const notices = events.filter((e): e is Event.Notice => e._tag === "Notice")
          expect(notices.map((n) => n.kind)).toEqual(["malformed", "malformed", "cut"])
          expect(notices[0]!.message).toBe(`${".".repeat(180)}${marker}`)
          expect(notices[1]!.raw).toBe(`${".".repeat(4054)}${marker}`)
          expect(notices[2]!.message).toBe(`${marker} rest`)
          // No piece of the token of 8 characters in any of them (the process printed the pieces
          // themselves on stdout: its one-shot credential is dead once the turn is over).
          const quoted = JSON.stringify(notices)
          for (let at = 0; at + 8 <= 43; at++) expect(quoted.includes(captured.slice(at, at + 8))).toBe(false)
        })
      )
    )
  })

  const deltasAround = (between: string, cut: number) =>
    runWith(
      shell([
        `printf '%s' "$TOKEN" > "$PWD/captured"`,
        `A=$(printf '%s' "$TOKEN" | cut -c1-${cut}); B=$(printf '%s' "$TOKEN" | cut -c${cut + 1}-)`,
        `echo '{"_tag":"SessionStarted","sessionId":"s-1","model":"m"}'`,
        `printf '{"_tag":"TextDelta","text":"key=%s"}\\n' "$A"`,
        `printf '%s\\n' '${between}'`,
        `printf '{"_tag":"TextDelta","text":"%s;"}\\n' "$B"`,
        `echo '{"_tag":"Terminal","ok":true,"text":"done","model":"m","session":"s-1","raw":{}}'`
      ].join("\n")),
      (agent, sandbox) =>
        Effect.gen(function*() {
          const events: Array<Event.Event> = []
          yield* agent.stream("go").pipe(Stream.runForEach((event) => Effect.sync(() => events.push(event))))
          const token = Fs.readFileSync(Path.join(sandbox.workspace, "captured"), "utf8")
          expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/)
          expect(events.at(-1)?._tag).toBe("RunFinished")
          // The event between the two deltas comes between them.
          const tags = events.map((e) => e._tag).filter((t) => t !== "RunStarted" && t !== "SessionStarted")
          expect(tags.indexOf("TextDelta")).toBeLessThan(tags.indexOf(JSON.parse(between)._tag))
          expect(tags.lastIndexOf("TextDelta")).toBeGreaterThan(tags.indexOf(JSON.parse(between)._tag))
          return { token, text: events.flatMap((e) => e._tag === "TextDelta" ? [e.text] : []).join("") }
        })
    ).pipe(Effect.map(({ value }) => value))

  it.live("a token split across two text deltas with another event between them: its rest goes out as the marker's rest", () =>
    Effect.gen(function*() {
      const toolCall = `{"_tag":"ToolCall","phase":"start","callId":"c","name":"env","source":"builtin","input":{}}`
      const notice = `{"_tag":"Notice","level":"info","kind":"k","message":"m"}`
      // Its first 20 characters released as the marker's first 20 by the event between, the rest as the rest.
      const long = yield* deltasAround(notice, 20)
      expect(long.text).toBe(`key=${marker};`)
      const longCall = yield* deltasAround(toolCall, 20)
      expect(longCall.text).toBe(`key=${marker};`)
      // Below 8 characters the first piece goes out as written (it could be any text); the rest is replaced.
      const short = yield* deltasAround(toolCall, 7)
      expect(short.text).toBe(`key=${short.token.slice(0, 7)}${marker.slice(7)};`)
      expect(short.text.includes(short.token.slice(7, 15))).toBe(false)
    }))

  it.live("a token split across text deltas with reasoning between: at most its first 7 characters go out as written", () => {
    let captured = ""
    return runWith(
      shell([
        `printf '%s' "$TOKEN" > "$PWD/captured"`,
        `A=$(printf '%s' "$TOKEN" | cut -c1-5); B=$(printf '%s' "$TOKEN" | cut -c6-12); C=$(printf '%s' "$TOKEN" | cut -c13-)`,
        `printf '{"_tag":"TextDelta","text":"key=%s"}\\n' "$A"`,
        `printf '{"_tag":"ReasoningDelta","text":"hm"}\\n'`,
        `printf '{"_tag":"TextDelta","text":"%s"}\\n' "$B"`,
        `printf '{"_tag":"Usage","usage":{"inputTokens":1}}\\n'`,
        `printf '{"_tag":"TextDelta","text":"%s;"}\\n' "$C"`,
        `printf '{"_tag":"ReasoningDelta","text":"%s%s"}\\n' "$A" "$B"`,
        `echo '{"_tag":"Terminal","ok":true,"text":"done","model":"m","session":"s-1","raw":{}}'`
      ].join("\n")),
      (agent, sandbox) => streamed(agent, sandbox, (token) => (captured = token))
    ).pipe(
      Effect.tap(({ value: events }) =>
        Effect.sync(() => {
          expect(captured).toMatch(/^[A-Za-z0-9_-]{43}$/)
          const of = (tag: string) => events.flatMap((e) => e._tag === tag && "text" in e ? [e.text] : []).join("")
          // 5 characters as written, then 7 held past the usage record: the marker's from the 8th on.
          expect(of("TextDelta")).toBe(`key=${captured.slice(0, 5)}${marker.slice(5)};`)
          // The turn's end (its terminal record): a piece of 12 characters becomes the whole marker.
          expect(of("ReasoningDelta")).toBe(`hm${marker}`)
        })
      )
    )
  })

  it.live("a token printed by the process is dead (401) as soon as the run returns, while the agent stays registered", () =>
    runWith(
      shell([
        `printf '%s' "$TOKEN" > "$PWD/captured"`,
        `echo '{"_tag":"Terminal","ok":true,"text":"done","model":"m","session":"s-1","raw":{}}'`
      ].join("\n")),
      (agent, sandbox, observed) =>
        Effect.gen(function*() {
          const result = yield* agent.run("go")
          const token = Fs.readFileSync(Path.join(sandbox.workspace, "captured"), "utf8")
          expect(result.text).toBe("done")
          expect(yield* Harness.probe({ url: observed[0]!.url, token: Redacted.make(token) })).toBe(401)
          expect(yield* Harness.probe(observed[0]!)).toBe(200)
          // The next run gets a fresh credential that works.
          expect((yield* agent.run("again")).text).toBe("done")
        })
    ))

  it.live("a run that ends without its terminal record says why: the end of its stderr, scrubbed and bounded", () =>
    runWith(
      shell([
        `i=1; while [ $i -le 30 ]; do echo "noise line $i" >&2; i=$((i+1)); done`,
        `echo "Error: must specify the EXAMPLE_API_KEY environment variable (token $TOKEN)" >&2`,
        `exit 41`
      ].join("\n")),
      (agent) => Effect.flip(agent.run("go"))
    ).pipe(
      Effect.map(({ value: error }) => {
        expect(error._tag).toBe("RunError")
        if (error._tag !== "RunError") return
        expect(error.reason).toBe("ExitedWithoutResult")
        expect(error.exitCode).toBe(41)
        expect(error.message).toContain("exited with code 41")
        expect(error.message).toContain("must specify the EXAMPLE_API_KEY environment variable")
        expect(error.message).toContain(marker)
        expect(error.message).toContain("noise line 30")
        expect(error.message).not.toContain("noise line 20\n")
        expect(error.detail.split("\n").length).toBeLessThanOrEqual(9)
        expect(error.message).not.toMatch(/token [A-Za-z0-9_-]{43}\)/)
      })
    ))

  it.live("a spawn failure names the binary it tried and how to fix it", () =>
    runWith(
      {
        ...Reference.driver(),
        install: "install it with `npm install example-cli`",
        prepare: (request) =>
          Effect.map(Reference.driver().prepare(request), (invocation) => ({
            ...invocation,
            command: "/nonexistent/example-cli"
          }))
      },
      (agent) => Effect.flip(agent.run("go"))
    ).pipe(
      Effect.map(({ value: error }) => {
        expect(error._tag === "RunError" && error.reason).toBe("SpawnFailed")
        expect(error.message).toContain("/nonexistent/example-cli")
        expect(error.message).toContain("npm install example-cli")
        expect(error.message).toContain("`binary`")
      })
    ))
})
