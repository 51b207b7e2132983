/**
 * A non-Effect host: plain async functions over a `ManagedRuntime`. The runtime builds the
 * agent layer once; the host gets promise-returning helpers (`ask`, `streamText`); a run can be
 * canceled with an `AbortSignal`; `runtime.dispose()` closes the agent (processes, clone, token).
 *
 *   node --conditions=@tether/source --import tsx examples/managed-runtime.ts [--driver claude|codex|gemini]
 */
import { Agent } from "@tether/core"
import { Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Model from "./support/model.js"
import * as View from "./support/view.js"

// --- The Effect side: one agent with one tool, as a Layer ----------------------------------

const Weather = Tool.make("weather", {
  description: "Today's weather in a city.",
  input: { city: Schema.String },
  output: Schema.Struct({ city: Schema.String, celsius: Schema.Number }),
  revision: "weather/v1",
  annotations: { readOnly: true, openWorld: true }
})
const Tools = Toolkit.make(Weather)
const ToolsLive = Tools.toLayer({ weather: ({ city }) => Effect.succeed({ city, celsius: city === "Oslo" ? 4 : 21 }) })

class Assistant extends Context.Tag("host/Assistant")<Assistant, Agent.Agent>() {}

const script: Model.Model = ({ prompt, results }) => {
  if (prompt.includes("[slow]")) return Model.answer("x".repeat(200_000)) // a long answer, canceled below
  const city = /in (\w+)\?/.exec(prompt)?.[1] ?? "Oslo"
  if (results.length === 0) return Model.call("weather", { city })
  return Model.answer(`It is ${/"celsius"\s*:\s*(-?\d+)/.exec(results[0]!.text)?.[1]} °C in ${city}.`)
}

const AssistantLive = Layer.unwrapScoped(Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  return Agent.layer(Assistant, {
    driver: yield* Model.offline(Model.driverArg(), script),
    definition: { instructions: "You answer weather questions.", skills: [], tools: Tools },
    workspace: sandbox.workspace,
    profile: sandbox.selection
  })
})).pipe(
  Layer.provide(ToolsLive),
  Layer.provide(Harness.layer),
  Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
)

// --- The host side: promises only -----------------------------------------------------------

const runtime = ManagedRuntime.make(AssistantLive)

/**
 * Runs an effect on the runtime. A failure rejects with the typed error itself (its `_tag`,
 * `reason`, `result`), where `runtime.runPromise` would reject with a `FiberFailure` wrapping it.
 */
const runPromise = <A, E>(effect: Effect.Effect<A, E, Assistant>, signal?: AbortSignal): Promise<A> =>
  runtime.runPromiseExit(effect, signal === undefined ? undefined : { signal }).then((exit) =>
    Exit.isSuccess(exit) ? exit.value : Promise.reject(Cause.squash(exit.cause))
  )

/** One question, one answer. Rejects with the agent's typed error (a `RunError`, ...). */
const ask = (question: string, options: { readonly signal?: AbortSignal; readonly tools?: Array<string> } = {}) =>
  runPromise(
    Effect.flatMap(
      Assistant,
      (agent) =>
        agent.run(options.tools === undefined ? question : { input: question, toolPolicy: { allow: options.tools } })
    ).pipe(Effect.map((result) => result.text)),
    options.signal
  )

/**
 * Streams the assistant's text as it arrives: its deltas, or whole messages from a CLI that
 * reports no deltas (Codex's `exec --json`). Resolves when the run ends.
 */
const streamText = (question: string, onText: (text: string) => void): Promise<void> =>
  runPromise(
    Effect.flatMap(Assistant, (agent) => {
      let deltas = false
      return agent.stream(question).pipe(
        Stream.runForEach((event) =>
          Effect.sync(() => {
            if (event._tag === "TextDelta") {
              deltas = true
              onText(event.text)
            } else if (event._tag === "Message" && event.role === "assistant" && !deltas) onText(event.text)
          })
        )
      )
    })
  )

const marker = (): Promise<string> => runPromise(Effect.map(Assistant, (agent) => agent.marker))

async function main(): Promise<void> {
  const check = View.checks()
  const id = await marker()
  const [oslo, lisbon] = await Promise.all([ask("What is the weather in Oslo?"), ask("What is the weather in Lisbon?")])
  View.write(`${View.bold("ask")} ${oslo}\n${View.bold("ask")} ${lisbon}\n`)
  check.claim(
    "two concurrent asks, each with its own tool call",
    oslo === "It is 4 °C in Oslo." && lisbon === "It is 21 °C in Lisbon."
  )

  let streamed = ""
  await streamText("What is the weather in Paris?", (text) => (streamed += text))
  View.write(`${View.bold("stream")} ${streamed}\n`)
  check.claim("streamText delivered the text as it arrived", streamed.endsWith("It is 21 °C in Paris."))

  const controller = new AbortController()
  const slow = ask("[slow] Tell me a very long story.", { signal: controller.signal })
  setTimeout(() => controller.abort(), 50)
  const canceled = await slow.then(() => false, () => true)
  View.write(`${View.bold("abort")} the run was canceled: ${canceled}\n`)
  check.claim("an AbortSignal cancels a run", canceled)
  check.claim(
    "the agent still answers after a cancel",
    (await ask("What is the weather in Rome?")) === "It is 21 °C in Rome."
  )

  // A failed run rejects with the typed error: here the turn names a tool the agent lacks.
  const refused = await ask("What is the weather in Oslo?", { tools: ["forecast"] }).then(
    () => undefined,
    (error: { readonly _tag?: string; readonly reason?: string }) => `${error._tag} ${error.reason}`
  )
  View.write(`${View.bold("error")} ${refused}\n`)
  check.claim("a failed run rejects with the agent's typed error", refused === "InvalidTurn UnknownTool")

  await runtime.dispose() // closes the agent
  const left = await Effect.runPromise(Harness.markedProcesses(id))
  check.claim("dispose closed the agent: no process left", left.length === 0)
  check.conclude("ManagedRuntime: the agent behind plain promises")
}

// A signal closes the agent (processes stopped, clone removed, token revoked) before exiting.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void runtime.dispose().finally(() => process.exit(signal === "SIGINT" ? 130 : 143))
  })
}

main().catch(async (error: unknown) => {
  console.error(error)
  process.exitCode = 1
  await runtime.dispose()
})
