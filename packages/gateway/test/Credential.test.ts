/**
 * Per-process credentials (minted, revoked early, released with their scope), the redactor of
 * live token values, and the argument keys a CLI injects on its own (replayed from frames the
 * real Gemini CLI 0.61.0 sent).
 */
import { describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Tool, Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { makeExecutor } from "./fixtures/executors.js"
import { captured, connect, logLayer, portOf, remember, settle } from "./fixtures/harness.js"
import { callBody, rawRequest } from "./fixtures/raw.js"

const headersFor = (url: string, token: string): ReadonlyArray<readonly [string, string]> => [
  ["Host", `127.0.0.1:${portOf(url)}`],
  ["Content-Type", "application/json"],
  ["Accept", "application/json, text/event-stream"],
  ["Authorization", `Bearer ${token}`]
]

const post = (url: string, token: string, body: string) =>
  rawRequest(portOf(url), { headers: headersFor(url, token), body }).pipe(
    Effect.map((response) => ({
      status: response.status,
      json: response.body === "" ? undefined : JSON.parse(response.body)
    }))
  )

describe("Credentials", () => {
  it.live("a credential lists the whole catalog by default, works until revoke, and the registration stays", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor, recorder } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      const own = remember(registration.token)
      const scope = yield* Scope.make()
      const credential = yield* registration.credential().pipe(Scope.extend(scope))
      const token = remember(credential.token)
      expect(credential.tools).toEqual(["big", "block", "echo", "fail", "reject", "stubborn"])
      expect((yield* post(registration.url, token, callBody("echo"))).status).toBe(200)
      yield* credential.revoke
      yield* credential.revoke
      expect((yield* post(registration.url, token, callBody("echo"))).status).toBe(401)
      // Revoked early, but still known to the redactor until its scope closes.
      expect(gateway.redactor.text(`x=${token}`)).toBe(`x=${Gateway.redactionMarker}`)
      yield* Scope.close(scope, Exit.void)
      expect(gateway.redactor.text(`x=${token}`)).toBe(`x=${token}`)
      expect((yield* post(registration.url, own, callBody("echo"))).status).toBe(200)
      expect(recorder.calls.map((c) => c.name)).toEqual(["echo", "echo"])
    }).pipe(Effect.scoped, Effect.provide(logLayer)))

  for (const end of ["revoke", "scope closing"] as const) {
    it.live(`a credential's ${end} cancels the calls made with it that are still running, not another's`, () =>
      Effect.gen(function*() {
        const gateway = yield* Gateway.make()
        const { executor, recorder } = yield* makeExecutor("a")
        const registration = yield* gateway.register(executor)
        const scope = yield* Scope.make()
        const credential = yield* registration.credential().pipe(Scope.extend(scope))
        const other = remember((yield* registration.credential()).token)
        const blocked = yield* Effect.fork(post(registration.url, remember(credential.token), callBody("block")))
        yield* Deferred.await(recorder.started)
        yield* end === "revoke" ? credential.revoke : Scope.close(scope, Exit.void)
        // Answered (a JSON-RPC error, the call canceled) and its handler interrupted, its finalizer run.
        const answer = yield* Fiber.join(blocked).pipe(
          Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => new Error("the blocked call still runs") })
        )
        expect(answer.status).toBe(200)
        expect(answer.json).toMatchObject({ id: 2, error: { code: expect.any(Number) } })
        yield* Effect.sleep("200 millis")
        expect(recorder.interrupted).toBe(1)
        // The other credential's calls go on.
        expect((yield* post(registration.url, other, callBody("echo"))).json).toMatchObject({ id: 2, result: {} })
      }).pipe(Effect.scoped, Effect.provide(logLayer)))
  }

  it.live(
    "a narrowed credential lists only its tools and refuses every alias of the others (case, spaces, NUL, full-width, prototype names)",
    () =>
      Effect.gen(function*() {
        const gateway = yield* Gateway.make()
        const { executor, recorder } = yield* makeExecutor("a")
        const registration = yield* gateway.register(executor)
        const narrowed = yield* registration.credential({ tools: ["echo", "nope"] })
        expect(narrowed.tools).toEqual(["echo"])
        const client = yield* connect(registration.url, narrowed.token)
        const listed = yield* Effect.promise(() => client.listTools())
        expect(listed.tools.map((t) => t.name)).toEqual(["echo"])
        const aliases = [
          "reject",
          "Reject",
          "REJECT",
          " reject",
          "reject ",
          "reject\u0000",
          "ｒｅｊｅｃｔ",
          "mcp__tether__reject",
          "__proto__",
          "constructor",
          "hasOwnProperty",
          "toString",
          "Echo",
          "echo "
        ]
        const answers = yield* Effect.forEach(
          aliases,
          (name) => settle(() => client.callTool({ name, arguments: { text: "x" } })),
          { concurrency: 4 }
        )
        for (const answer of answers) {
          expect(answer.ok).toBe(false)
          expect(String((answer as { error: unknown }).error)).toContain("Unknown tool")
        }
        expect(recorder.calls.map((c) => c.name)).toEqual([])
        const ok = yield* Effect.promise(() => client.callTool({ name: "echo", arguments: { text: "x" } }))
        expect(ok.isError).toBeFalsy()
      }).pipe(Effect.scoped, Effect.provide(logLayer)),
    20_000
  )

  it.live("credentials minted past one draw of tokens are each new, 43 base64url characters, and each its own", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const registration = yield* gateway.register((yield* makeExecutor("a")).executor)
      // Tokens are drawn from the random source 64 at a time: 150 credentials span three draws.
      const credentials = yield* Effect.forEach(Array.from({ length: 150 }), () => registration.credential())
      const tokens = credentials.map((credential) => Redacted.value(credential.token))
      expect(new Set([...tokens, Redacted.value(registration.token)]).size).toBe(151)
      for (const token of tokens) expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/)
      // Each authenticates its own calls, and revoking one leaves the one drawn with it working.
      const [first, second] = [credentials[0]!, credentials[1]!]
      yield* first.revoke
      expect((yield* post(registration.url, tokens[0]!, callBody("echo"))).status).toBe(401)
      expect((yield* post(registration.url, tokens[1]!, callBody("echo"))).status).toBe(200)
      expect((yield* post(registration.url, tokens[149]!, callBody("echo"))).status).toBe(200)
      yield* second.revoke
      expect((yield* post(registration.url, tokens[1]!, callBody("echo"))).status).toBe(401)
    }).pipe(Effect.scoped, Effect.provide(logLayer)))

  it.live("listed completes on the first tools/list made with that credential's token, not another's", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const registration = yield* gateway.register((yield* makeExecutor("a")).executor)
      const first = yield* registration.credential({ tools: ["echo"] })
      const second = yield* registration.credential({ tools: ["echo"] })
      const listBody = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} })
      const done = (credential: Gateway.Credential) =>
        credential.listed.pipe(Effect.timeoutOption("50 millis"), Effect.map((o) => o._tag === "Some"))
      // A call is not a listing, and a wrong token lists nothing.
      expect((yield* post(registration.url, remember(first.token), callBody("echo"))).status).toBe(200)
      expect((yield* post(registration.url, "not-a-token", listBody)).status).toBe(401)
      expect(yield* done(first)).toBe(false)
      expect((yield* post(registration.url, remember(first.token), listBody)).status).toBe(200)
      expect(yield* done(first)).toBe(true)
      expect(yield* done(second)).toBe(false)
      // Listed before anyone waits: a wait that starts afterwards completes at once.
      const third = yield* registration.credential({ tools: ["echo"] })
      expect((yield* post(registration.url, remember(third.token), listBody)).status).toBe(200)
      expect(yield* done(third)).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(logLayer)))

  it.live("the redactor replaces every live token of every registration, in text, bytes and values", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const a = yield* gateway.register((yield* makeExecutor("a")).executor)
      const b = yield* gateway.register((yield* makeExecutor("b")).executor)
      const credential = yield* b.credential({ tools: ["echo"] })
      const [ta, tc] = [Redacted.value(a.token), Redacted.value(credential.token)]
      const marker = Gateway.redactionMarker
      expect(marker.length).toBe(ta.length)
      const r = gateway.redactor
      expect(r.text(`A=${ta}\nC=${tc}${tc}`)).toBe(`A=${marker}\nC=${marker}${marker}`)
      expect(r.text("nothing here")).toBe("nothing here")
      const bytes = Buffer.from(`{"env":"${tc}"}`)
      const out = Buffer.from(r.bytes(bytes))
      expect(out.length).toBe(bytes.length)
      expect(out.toString()).toBe(`{"env":"${marker}"}`)
      const clean = Buffer.from("no token")
      expect(r.bytes(clean)).toBe(clean)
      const value = { keep: 1, list: [`t ${ta}`, { [tc]: tc }], at: new Date(0) }
      const redacted = r.value(value)
      expect(redacted).toEqual({ keep: 1, list: [`t ${marker}`, { [marker]: marker }], at: new Date(0) })
      expect(value.list[0]).toBe(`t ${ta}`)
      const untouched = { list: ["a", { b: 2 }] }
      expect(r.value(untouched)).toBe(untouched)
      // Streaming: the start of a token at the end of a chunk is held back.
      expect(r.heldBack(`text ${tc.slice(0, 10)}`)).toBe(10)
      // Text ending outside the token alphabet (base64url): nothing to hold, whatever the tokens
      // are. ("text" would be held back by 1 whenever a live token starts with "t".)
      expect(r.heldBack("text.")).toBe(0)
      // A bounded window: a token cut by either edge is replaced too.
      expect(r.window(`${ta.slice(20)} middle ${tc.slice(0, 30)}`)).toBe(`${marker} middle ${marker}`)
      expect(r.window(`${ta.slice(40)} short`)).toBe(`${ta.slice(40)} short`)
    }).pipe(Effect.scoped, Effect.provide(logLayer)))
})

const Lookup = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ key: Schema.String }),
  revision: "lookup_issue/v1"
})
const Wait = Tool.make("wait", {
  description: "A tool whose own input is called wait_for_previous.",
  input: { wait_for_previous: Schema.Boolean },
  output: Schema.Struct({ waited: Schema.Boolean }),
  revision: "wait/v1"
})
const Quote = Tool.make("quote", {
  description: "Fails with a defect that quotes its input.",
  input: { text: Schema.String },
  output: Schema.Struct({ ok: Schema.Boolean }),
  revision: "quote/v1"
})
const Tools = Toolkit.make(Lookup, Wait, Quote)
const seen: Array<unknown> = []
const ToolsLive = Tools.toLayer({
  lookup_issue: (input) => Effect.sync(() => (seen.push(input), { key: input.key })),
  wait: (input) => Effect.sync(() => (seen.push(input), { waited: input.wait_for_previous })),
  quote: (input) => Effect.die(new Error(`cannot use ${input.text}`))
})

/** The `tools/call` bodies the real Gemini CLI 0.61.0 sent, retargeted at `name` with `key`. */
const geminiFrames = Fs.readFileSync(
  Path.join(import.meta.dirname, "fixtures", "frames", "gemini-0.61.0-tools-call.jsonl"),
  "utf8"
).trim().split("\n").map((line) => JSON.parse(line) as { params: { arguments: Record<string, unknown> } })

const retarget = (frame: (typeof geminiFrames)[number], name: string, args: Record<string, unknown>) =>
  JSON.stringify({ ...frame, params: { ...frame.params, name, arguments: args } })

describe("Injected arguments", () => {
  it.live("the recorded Gemini frames: handled without the injected key, which stays refused otherwise", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const registration = yield* gateway.register(yield* Toolkit.executor(Tools))
      const gemini = remember((yield* registration.credential({ injectedArguments: ["wait_for_previous"] })).token)
      const plain = remember((yield* registration.credential()).token)
      expect(geminiFrames.map((f) => f.params.arguments["wait_for_previous"])).toEqual([true, false])
      seen.length = 0
      for (const frame of geminiFrames) {
        const { text: _, ...injected } = frame.params.arguments
        const body = retarget(frame, "lookup_issue", { key: "ISSUE-42", ...injected })
        const ok = yield* post(registration.url, gemini, body)
        expect(ok.status).toBe(200)
        expect(ok.json.result.isError).toBeUndefined()
        expect(ok.json.result.structuredContent).toEqual({ key: "ISSUE-42" })
        // Without the driver's declaration the excess key is still an invalid input.
        const refused = yield* post(registration.url, plain, body)
        expect(refused.json.result.isError).toBe(true)
        expect(refused.json.result.content[0].text).toContain("invalid_input")
      }
      expect(seen).toEqual([{ key: "ISSUE-42" }, { key: "ISSUE-42" }])
      // A tool that declares the key itself receives it.
      const own = yield* post(registration.url, gemini, retarget(geminiFrames[0]!, "wait", { wait_for_previous: true }))
      expect(own.json.result.structuredContent).toEqual({ waited: true })
      // Any other unknown key is still refused through the same credential.
      const other = yield* post(
        registration.url,
        gemini,
        retarget(geminiFrames[0]!, "lookup_issue", { key: "ISSUE-42", wait_for_previous: true, extra: 1 })
      )
      expect(other.json.result.content[0].text).toContain("invalid_input")
      expect(seen).toEqual([{ key: "ISSUE-42" }, { key: "ISSUE-42" }, { wait_for_previous: true }])
    }).pipe(Effect.scoped, Effect.provide([ToolsLive, logLayer])))
})

describe("Logs", () => {
  it.live("a token in a log annotation reaches the host's log only as the marker; other annotations unchanged", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const registration = yield* gateway.register(yield* Toolkit.executor(Tools))
      const token = Redacted.value(registration.token)
      const from = captured.length
      yield* Effect.logInfo("annotated").pipe(
        Effect.annotateLogs({ argument: `key=${token}`, plain: "kept as it is" }),
        gateway.redactor.logs
      )
      yield* Effect.logInfo("plain line").pipe(Effect.annotateLogs({ plain: "kept as it is" }), gateway.redactor.logs)
      const [annotated, plain] = captured.slice(from)
      expect(annotated).toContain(`key=${Gateway.redactionMarker}`)
      expect(annotated).toContain("kept as it is")
      expect(annotated).not.toContain(token)
      expect(plain).toContain("plain line")
      expect(plain).toContain("kept as it is")
    }).pipe(Effect.scoped, Effect.provide([ToolsLive, logLayer])))

  it.live("a token a model passes as an argument reaches the host's log only as the marker", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const registration = yield* gateway.register(yield* Toolkit.executor(Tools))
      const token = Redacted.value((yield* registration.credential()).token)
      const from = captured.length
      const answer = yield* post(registration.url, token, callBody("quote", { text: `leaked=${token}` }))
      expect(answer.json.result.content[0].text).toBe("internal_error: The tool failed.")
      const lines = captured.slice(from).join("\n")
      expect(lines).toContain("cannot use leaked=")
      expect(lines).toContain(Gateway.redactionMarker)
      expect(lines).not.toContain(token)
    }).pipe(Effect.scoped, Effect.provide([ToolsLive, logLayer])))
})
