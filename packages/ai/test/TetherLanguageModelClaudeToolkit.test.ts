/**
 * The toolkit passed to a LanguageModel call on the real Claude Code CLI (offline: the scripted
 * Anthropic server is the model): calls the gateway refuses, interruption while a handler runs,
 * a Void or Undefined tool's result, concurrent calls with their own handlers, a toolkit with generateObject.
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as AiTool from "@effect/ai/Tool"
import * as AiTools from "@effect/ai/Toolkit"
import { describe, expect, it } from "@effect/vitest"
import { AiToolkit, TetherLanguageModel } from "@tether/ai"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Harness } from "@tether/testing"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { agentProcesses } from "./fixtures/processes.js"

const Slow = AiTool.make("slow_lookup", {
  description: "A slow lookup.",
  parameters: { key: Schema.String },
  success: Schema.Struct({ value: Schema.String })
}).annotate(AiToolkit.Revision, "slow_lookup/v1")
const Ping = AiTool.make("ping", {
  description: "Pings the service.",
  parameters: { host: Schema.String }
}).annotate(AiToolkit.Revision, "ping/v1")
const Tools = AiTools.make(Slow, Ping)

const WhoAmI = AiTool.make("whoami", {
  description: "The current user.",
  success: Schema.Struct({ user: Schema.String })
}).annotate(AiToolkit.Revision, "whoami/v1")
const Session = AiTools.make(WhoAmI)

const Reset = AiTool.make("reset_cache", {
  description: "Resets the cache.",
  parameters: { key: Schema.String },
  success: Schema.Undefined
}).annotate(AiToolkit.Revision, "reset_cache/v1")
const Cache = AiTools.make(Reset)

const withModel = <A, E, R>(server: AnthropicServer.AnthropicServer, body: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const model = TetherLanguageModel.layer({
      driver: Claude.driver({
        env: {
          ANTHROPIC_BASE_URL: server.url,
          ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
          CLAUDE_CODE_MAX_RETRIES: "0"
        }
      }),
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    const value = yield* body.pipe(Effect.provide(model))
    expect(yield* agentProcesses).toEqual([])
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return value
  }).pipe(Effect.provide(Harness.layer))

describe("a LanguageModel call's toolkit on the real Claude CLI", () => {
  it.live(
    "a call with an extra key is refused (invalid_input): no tool-call part, listed with its input",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [
            AnthropicServer.callTool("slow_lookup", { key: "k", verbose: true }),
            AnthropicServer.callTool("slow_lookup", { key: "k" }),
            AnthropicServer.reply("v")
          ]
        })
        const looked: Array<string> = []
        const response = yield* withModel(
          server,
          LanguageModel.generateText({ prompt: "Look up k.", toolkit: Tools }).pipe(
            Effect.provide(Tools.toLayer({
              slow_lookup: ({ key }) => Effect.sync(() => looked.push(key)).pipe(Effect.as({ value: "v" })),
              ping: () => Effect.void
            }))
          )
        )
        // The handler ran once: the first call was refused before it.
        expect(looked).toEqual(["k"])
        const [first] = AnthropicServer.toolResults((yield* server.messages)[1]!)
        expect(first?.isError).toBe(true)
        expect(first?.text).toContain("invalid_input")
        // The refused call is no tool-call part: it is listed as failed, with the params the model sent.
        const finish = response.content.find((p) => p.type === "finish")!
        expect(response.toolCalls.map((c) => c.params)).toEqual([{ key: "k" }])
        expect(finish.metadata["tether"]?.["failedToolCalls"]).toMatchObject([
          { name: "slow_lookup", input: { key: "k", verbose: true } }
        ])
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "interrupting streamText while the toolkit's handler runs stops the handler, the CLI and the clone",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [AnthropicServer.callTool("slow_lookup", { key: "k" }), AnthropicServer.reply("done")]
        })
        const started = yield* Deferred.make<void>()
        let interrupted = false
        let finished = false
        const live = Tools.toLayer({
          slow_lookup: () =>
            Deferred.succeed(started, undefined).pipe(
              Effect.zipRight(Effect.sleep("20 seconds")),
              Effect.tap(() => Effect.sync(() => finished = true)),
              Effect.onInterrupt(() => Effect.sync(() => interrupted = true)),
              Effect.as({ value: "v" })
            ),
          ping: () => Effect.void
        })
        yield* withModel(
          server,
          Effect.gen(function*() {
            const fiber = yield* LanguageModel.streamText({ prompt: "Look up k.", toolkit: Tools }).pipe(
              Stream.runDrain,
              Effect.provide(live),
              Effect.fork
            )
            yield* Deferred.await(started)
            const t0 = performance.now()
            yield* Fiber.interrupt(fiber).pipe(Effect.timeout(Duration.seconds(15)))
            const elapsed = performance.now() - t0
            expect(elapsed).toBeLessThan(10_000)
            expect(interrupted).toBe(true)
            expect(finished).toBe(false)
          })
        )
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "a tool with @effect/ai's default Void success: the successful call has its tool-result",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [AnthropicServer.callTool("ping", { host: "a" }), AnthropicServer.reply("pinged")]
        })
        const pinged: Array<string> = []
        const response = yield* withModel(
          server,
          LanguageModel.generateText({ prompt: "Ping a.", toolkit: Tools }).pipe(
            Effect.provide(Tools.toLayer({
              slow_lookup: () => Effect.succeed({ value: "v" }),
              ping: ({ host }) => Effect.sync(() => void pinged.push(host))
            }))
          )
        )
        expect(pinged).toEqual(["a"])
        const finish = response.content.find((p) => p.type === "finish")!
        expect(finish.metadata["tether"]?.["failedToolCalls"]).toEqual([])
        expect(response.toolCalls.map((c) => c.name)).toEqual(["ping"])
        expect(response.toolResults.map((r) => [r.name, r.isFailure])).toEqual([["ping", false]])
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "generateObject with a toolkit: the tool's call and result are parts, the value decoded",
    () =>
      Effect.gen(function*() {
        const Answer = Schema.Struct({ value: Schema.String })
        const server = yield* AnthropicServer.make({
          script: [
            AnthropicServer.callTool("slow_lookup", { key: "k" }),
            AnthropicServer.callTool("StructuredOutput", { value: "v" })
          ]
        })
        const response = yield* withModel(
          server,
          LanguageModel.generateObject({ prompt: "Look up k.", schema: Answer, toolkit: Tools }).pipe(
            Effect.provide(Tools.toLayer({
              slow_lookup: () => Effect.succeed({ value: "v" }),
              ping: () => Effect.void
            }))
          )
        )
        expect(response.value).toEqual({ value: "v" })
        expect(response.toolCalls.map((c) => c.name)).toEqual(["slow_lookup"])
        expect(response.toolResults.map((r) => r.result)).toEqual([{ value: "v" }])
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "two concurrent calls with different handler layers: each CLI's call reaches its own call's handler",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          respond: AnthropicServer.roundTrip(
            () => AnthropicServer.callTool("whoami", {}),
            (results) => AnthropicServer.reply(`You are ${results[0]?.text ?? "?"}`)
          )
        })
        const served: Array<string> = []
        const call = (user: string) =>
          LanguageModel.generateText({ prompt: `Who am I (${user})?`, toolkit: Session }).pipe(
            Effect.provide(Session.toLayer({
              whoami: () => Effect.sync(() => served.push(user)).pipe(Effect.as({ user }))
            }))
          )
        const [alice, bob] = yield* withModel(
          server,
          Effect.all([call("alice"), call("bob")], { concurrency: "unbounded" })
        )
        expect(served.sort()).toEqual(["alice", "bob"])
        expect(alice.toolResults.map((r) => r.result)).toEqual([{ user: "alice" }])
        expect(bob.toolResults.map((r) => r.result)).toEqual([{ user: "bob" }])
        expect(alice.text).toContain("alice")
        expect(bob.text).toContain("bob")
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "a tool whose success is Schema.Undefined: its result part decodes (sent as null, handed over as undefined)",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [AnthropicServer.callTool("reset_cache", { key: "k" }), AnthropicServer.reply("Reset.")]
        })
        const reset: Array<string> = []
        const response = yield* withModel(
          server,
          LanguageModel.generateText({ prompt: "Reset k.", toolkit: Cache }).pipe(
            Effect.provide(Cache.toLayer({ reset_cache: ({ key }) => Effect.sync(() => void reset.push(key)) }))
          )
        )
        expect(reset).toEqual(["k"])
        expect(response.text).toBe("Reset.")
        expect(response.toolResults.map((r) => [r.name, r.isFailure, r.result])).toEqual([
          ["reset_cache", false, undefined]
        ])
      }).pipe(Effect.scoped),
    90_000
  )
})
