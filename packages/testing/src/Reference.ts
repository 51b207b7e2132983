/**
 * The reference driver: the smallest correct implementation of the driver SPI. Its "provider"
 * is an in-memory script (`respond(prompt)`) replayed by a tiny Node process whose stdout
 * protocol is the SPI's own `Driver.Output`, one JSON object per line. It passes the
 * conformance suite and is the model for third-party drivers. With `live: true` it also has a
 * live member (DESIGN §12): one process (`bin/reference-live.mjs`) per thread serves its turns
 * over a JSON-lines protocol of its own, takes steered input and interrupts, and passes the live
 * clauses.
 *
 * @since 0.1.0
 */
import type { Driver } from "@tether/core"
import { parseFromLines, ProtocolError } from "@tether/core/Driver"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import { createRequire } from "node:module"
import * as NodePath from "node:path"
import * as NodeProcess from "node:process"

/**
 * One step of the in-memory provider: an output to print, or a behaviour of the process.
 *
 * @since 0.1.0
 * @category models
 */
export type Step =
  | Driver.Output
  /** Waits `ms`; on the live process, with `untilInput`, a steered input ends the wait too. */
  | { readonly _tag: "$sleep"; readonly ms: number; readonly untilInput?: boolean }
  | { readonly _tag: "$exit"; readonly code: number }
  | { readonly _tag: "$hang" }
  /** Live only: calls a hosted tool through the gateway (the one-shot process reports a Notice). */
  | { readonly _tag: "$call"; readonly tool: string; readonly input: unknown }

/**
 * The reference driver's behaviour for a prompt and its capabilities.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The provider's behaviour for a prompt (default: `answer(prompt)`). */
  readonly respond?: (prompt: string) => ReadonlyArray<Step>
  readonly capabilities?: Partial<Driver.Capabilities>
  /**
   * Gives the driver its live member (a warm process per thread; `persistentProcess`,
   * `streamingInput` and `resume` capabilities on unless `capabilities` says otherwise).
   */
  readonly live?: boolean
}

/**
 * A plain successful answer echoing the prompt.
 *
 * @since 0.1.0
 * @category constructors
 */
export const answer = (prompt: string, session = "reference-session"): ReadonlyArray<Step> => [
  { _tag: "SessionStarted", sessionId: session, model: "reference-model" },
  { _tag: "TextDelta", text: prompt },
  { _tag: "Message", role: "assistant", text: prompt },
  {
    _tag: "Terminal",
    ok: true,
    text: prompt,
    usage: { inputTokens: prompt.length, outputTokens: prompt.length },
    model: "reference-model",
    session,
    error: undefined,
    raw: { answered: prompt }
  }
]

// Replays its stdin: prints output lines, performs `$` steps (`$exit` once stdout is flushed).
const program = `
const lines = require("fs").readFileSync(0, "utf8").split("\\n").filter(Boolean);
(async () => {
  for (const line of lines) {
    const step = JSON.parse(line);
    if (step._tag === "$sleep") await new Promise((r) => setTimeout(r, step.ms));
    else if (step._tag === "$exit") { process.stdout.write("", () => process.exit(step.code)); return; }
    else if (step._tag === "$hang") { process.on("SIGTERM", () => {}); setInterval(() => {}, 1 << 30); return; }
    else if (step._tag === "$call") process.stdout.write(JSON.stringify({ _tag: "Notice", level: "warning", kind: "unsupported", message: "$call needs the live process" }) + "\\n");
    else process.stdout.write(line + "\\n");
  }
})();
`

const isOutput = (value: unknown): value is Driver.Output =>
  value !== null && typeof value === "object" && typeof (value as { readonly _tag?: unknown })._tag === "string"

/**
 * Parses the reference protocol: each line is a JSON `Driver.Output`; anything else is a
 * `Notice`. Built from a line function (`Driver.parseFromLines`): a run then reads the process's
 * lines with it directly.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse: Driver.Driver["parse"] = parseFromLines(() => (line): Driver.Output => {
  try {
    const value: unknown = JSON.parse(line)
    if (isOutput(value)) return value
  } catch {
    // not the protocol
  }
  return { _tag: "Notice", level: "warning", kind: "malformed", message: line.slice(0, 200) }
})

/**
 * The reference driver: a minimal complete driver (a Node script as its CLI) that passes the
 * conformance suite. Read it as the model of a third-party driver.
 *
 * @since 0.1.0
 * @category constructors
 */
export const driver = (options: Options = {}): Driver.Driver => ({
  name: "reference",
  capabilities: {
    resume: options.live === true,
    fork: false,
    mcpTransports: ["http"],
    instructions: true,
    skillsProjection: false,
    sandbox: ["readOnly", "workspaceWrite"],
    toolAllowList: false,
    streamingInput: options.live === true,
    structuredOutput: "instruction",
    persistentProcess: options.live === true,
    ...options.capabilities
  },
  layout: {
    provider: "reference",
    selectorEnv: ["REFERENCE_HOME"],
    nativeDefault: (env) => `${env["HOME"] ?? "/nonexistent"}/.reference`,
    classes: { settings: ["settings.json"], mcp: [], skills: [], auth: ["auth.json"] },
    reserved: ["mcp.json"],
    siblings: []
  },
  prepare: (request) =>
    Effect.succeed({
      command: NodeProcess.execPath,
      args: ["-e", program],
      env: { PATH: request.hostEnv["PATH"] ?? "/usr/bin:/bin", REFERENCE_HOME: request.profileDir },
      cwd: request.workspace,
      stdin: (options.respond ?? answer)(request.prompt).map((step) => JSON.stringify(step)).join("\n") + "\n",
      files: [mcpFile(request)]
    }),
  parse,
  ...(options.live === true ? { live: live(options.respond ?? answer) } : {})
})

const mcpFile = (request: Driver.InvocationRequest): Driver.MaterializedFile => ({
  path: "mcp.json",
  content: JSON.stringify({
    mcpServers: {
      [request.hosted.key]: {
        url: request.hosted.url,
        headers: { Authorization: `Bearer \${${request.hosted.tokenVariable}}` }
      }
    }
  })
})

/**
 * Absolute path of the reference driver's live CLI (run it with `node`).
 *
 * @since 0.3.0
 * @category constants
 */
export const liveProgramPath: string = NodePath.join(
  NodePath.dirname(createRequire(import.meta.url).resolve("@tether/testing/package.json")),
  "bin",
  "reference-live.mjs"
)

type Record =
  | { readonly turn: number; readonly output: Driver.Output }
  | { readonly type: "ack"; readonly id: number; readonly delivery: "Injected" | null }

const isRecord = (value: unknown): value is Record =>
  value !== null && typeof value === "object" &&
  (typeof (value as { readonly turn?: unknown }).turn === "number" &&
      isOutput((value as { output?: unknown }).output) ||
    (value as { readonly type?: unknown }).type === "ack")

/**
 * The live member: `open` starts `bin/reference-live.mjs` for the session, `attach` reads its
 * records (outputs tagged with their turn, acknowledgements of steers and interrupts) in one
 * fiber and hands each turn its own outputs, so the end of an earlier, interrupted turn never
 * ends a later one.
 */
const live = (respond: (prompt: string) => ReadonlyArray<Step>): Driver.Live => ({
  open: (request) =>
    Effect.succeed({
      command: NodeProcess.execPath,
      args: [liveProgramPath],
      env: {
        PATH: request.hostEnv["PATH"] ?? "/usr/bin:/bin",
        REFERENCE_HOME: request.profileDir,
        REFERENCE_SESSION: request.session.id
      },
      cwd: request.workspace,
      stdin: undefined,
      files: [mcpFile(request)]
    }),
  attach: (channel) =>
    Effect.gen(function*() {
      // Outputs of every turn, in order; `undefined` once the process's stdout ended.
      const outputs = yield* Queue.unbounded<{ readonly turn: number; readonly output: Driver.Output } | undefined>()
      const acks = new Map<number, Deferred.Deferred<"Injected" | null, ProtocolError>>()
      let gone = false
      let turns = 0
      let requests = 0
      const exited = new ProtocolError({ reason: "ProviderError", detail: "the reference live process exited" })
      yield* channel.lines.pipe(
        Stream.runForEach((line) => {
          let value: unknown
          try {
            value = JSON.parse(line)
          } catch {
            value = undefined
          }
          if (!isRecord(value)) {
            const notice: Driver.Output = {
              _tag: "Notice",
              level: "warning",
              kind: "malformed",
              message: line.slice(0, 200)
            }
            return Queue.offer(outputs, { turn: turns, output: notice })
          }
          if ("output" in value) return Queue.offer(outputs, value)
          const ack = acks.get(value.id)
          acks.delete(value.id)
          return ack === undefined ? Effect.void : Deferred.succeed(ack, value.delivery)
        }),
        Effect.ensuring(Effect.suspend(() => {
          gone = true
          for (const ack of acks.values()) Deferred.unsafeDone(ack, Effect.fail(exited))
          acks.clear()
          return Queue.offer(outputs, undefined)
        })),
        Effect.forkScoped
      )
      const request = (frame: { readonly type: "steer"; readonly text: string } | { readonly type: "interrupt" }) =>
        Effect.gen(function*() {
          if (gone) return yield* exited
          const id = ++requests
          const ack = yield* Deferred.make<"Injected" | null, ProtocolError>()
          acks.set(id, ack)
          yield* channel.write(JSON.stringify({ ...frame, id }))
          return yield* Deferred.await(ack)
        })
      // The end of stdout, seen once, stays seen by every later read.
      const next = Effect.flatMap(Queue.take(outputs), (record) =>
        record === undefined
          ? Effect.zipRight(Queue.offer(outputs, undefined), Effect.fail(Option.none()))
          : Effect.succeed(record))
      return {
        turn: ({ prompt }) =>
          Stream.unwrap(Effect.gen(function*() {
            const turn = ++turns
            yield* channel.write(JSON.stringify({ type: "turn", turn, steps: respond(prompt) }))
            return Stream.repeatEffectOption(next).pipe(
              Stream.filter((record) => record.turn === turn),
              Stream.map((record) => record.output),
              Stream.takeUntil((output) => output._tag === "Terminal")
            )
          })),
        steer: (text) =>
          Effect.flatMap(request({ type: "steer", text }), (delivery) =>
            delivery === null
              ? Effect.fail(new ProtocolError({ reason: "NoActiveTurn", detail: "no turn was running for the input" }))
              : Effect.succeed({ _tag: delivery } as const)),
        interrupt: Effect.asVoid(request({ type: "interrupt" })),
        shutdown: channel.closeInput
      }
    })
})
