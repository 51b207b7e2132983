/**
 * Test harness for the ACP driver with real ACP agents, offline: the two pinned adapters
 * configured against the scripted model servers, the hosted tools on a real gateway, and a live
 * process opened as core opens one (the invocation's files in the clone, exactly its environment
 * plus the token variable of the process's credential, the session's token under that name plus
 * `_S`, and the marker).
 */
import { NodeContext } from "@effect/platform-node"
import * as FileSystem from "@effect/platform/FileSystem"
import type * as Driver from "@tether/core/Driver"
import * as Unstable from "@tether/core/Unstable"
import { Acp, Claude, Codex } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { LiveChannel } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Path from "node:path"

const modules = Path.resolve(import.meta.dirname, "../../../node_modules")

/** `@zed-industries/claude-agent-acp`'s entry point, run with this Node. */
export const claudeAgentAcp = Path.join(modules, "@zed-industries/claude-agent-acp/dist/index.js")

/** The native `codex-acp` (its npm `bin` is a wrapper that orphans it on SIGTERM). */
export const codexAcp = Path.join(modules, "@zed-industries/codex-acp-linux-x64/bin/codex-acp")

/** The pinned Claude Code binary the Claude Agent SDK is pointed at. */
export const claudeExecutable = Path.join(modules, "@anthropic-ai/claude-code/bin/claude.exe")

/** claude-agent-acp driving the pinned Claude Code against the scripted Anthropic server at `url`. */
export const claudeAgentDriver = (url: string, live?: Acp.Config["live"]) =>
  Acp.driver({
    name: "claude-agent-acp",
    command: process.execPath,
    args: [claudeAgentAcp],
    env: {
      ANTHROPIC_BASE_URL: url,
      ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
      CLAUDE_CODE_EXECUTABLE: claudeExecutable,
      CLAUDE_CODE_MAX_RETRIES: "0",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_ERROR_REPORTING: "1",
      // As root the Claude Agent SDK refuses to start its session without it.
      ...(process.getuid?.() === 0 ? { IS_SANDBOX: "1" } : {})
    },
    layout: Claude.layout,
    naming: Acp.claudeNaming,
    ...(live === undefined ? {} : { live })
  })

/**
 * codex-acp (its own Codex core) against the scripted Responses server at `baseUrl`, asking for
 * `model` (default `fake-model`; codex-acp 0.16.0 tells a model it has no metadata for as
 * assistant text, so a test of the answer's exact text names a model it knows).
 */
export const codexAgentDriver = (baseUrl: string, live?: Acp.Config["live"], model = "fake-model") =>
  Acp.driver({
    name: "codex-acp",
    command: codexAcp,
    args: [
      "-c",
      `model="${model}"`,
      "-c",
      `model_provider="fake"`,
      "-c",
      `model_providers.fake={ name = "fake", base_url = "${baseUrl}", wire_api = "responses", env_key = "FAKE_CODEX_KEY", request_max_retries = 0, stream_max_retries = 0 }`,
      "-c",
      "check_for_update_on_startup=false",
      "-c",
      "features.plugins=false",
      "-c",
      "analytics.enabled=false",
      "-c",
      "feedback.enabled=false"
    ],
    env: { FAKE_CODEX_KEY: Redacted.make("sk-fake-codex") },
    layout: Codex.layout,
    naming: Acp.codexNaming,
    ...(live === undefined ? {} : { live })
  })

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
export const Tools = Toolkit.make(Echo, SlowWait)

/** A gateway registration of `echo` and `slow_wait`; `slowStarted` completes when a slow call begins. */
export const hostedTools = Effect.gen(function*() {
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

export interface Opened {
  readonly process: LiveChannel.LiveProcess
  readonly session: Driver.LiveSession
  readonly marker: string
}

/** What core does for a live process: `live.open`, the files, the spawn, `live.attach`. */
export const openLive = (
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
        [`${request.hosted.tokenVariable}_S`]: Redacted.value(presented),
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

export const collect = (stream: Stream.Stream<Driver.Output, Driver.ProtocolError>) =>
  stream.pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))

export const terminalOf = (outputs: ReadonlyArray<Driver.Output>): Driver.Terminal => {
  const last = outputs.at(-1)
  if (last?._tag !== "Terminal") throw new Error(`the turn did not end with its Terminal: ${JSON.stringify(last)}`)
  return last
}

export type ToolCallOutput = Extract<Driver.Output, { _tag: "ToolCall" }>

export const toolCalls = (outputs: ReadonlyArray<Driver.Output>): ReadonlyArray<ToolCallOutput> =>
  outputs.filter((o): o is ToolCallOutput => o._tag === "ToolCall")
