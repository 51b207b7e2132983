/**
 * Gemini CLI's live protocol: `gemini --acp`, driven by Tether's ACP client. The process gets
 * exactly what a one-shot turn of the same request gets (files, environment, model, trust,
 * approval mode, the run's tool policy file); only the mode flag differs, and the session is
 * created or loaded over ACP instead of by `--session-id` / `--resume`.
 *
 * @internal
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Driver from "@tether/core/Driver"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { Config } from "../Gemini.js"
import * as Acp from "./acp.js"
import * as AcpMap from "./acpMap.js"
import type * as Binary from "./binary.js"
import { onlyHosted, type Renamed, toolIdentity } from "./geminiParse.js"

/**
 * The function name inside a Gemini CLI 0.61 tool call id. The CLI names every call
 * `<name>__<id>`, where the id it makes itself is `<name>_<ms>_<n>` (the model may supply its own);
 * a name may itself contain `__`, so the self-made form is matched exactly first.
 *
 * @internal
 */
export const functionName = (toolCallId: string): string | undefined => {
  let at = toolCallId.indexOf("__")
  const first = at
  while (at > 0) {
    const name = toolCallId.slice(0, at)
    const rest = toolCallId.slice(at + 2)
    if (rest.startsWith(`${name}_`) && /^\d+_\d+$/.test(rest.slice(name.length + 1))) return name
    at = toolCallId.indexOf("__", at + 1)
  }
  return first > 0 ? toolCallId.slice(0, first) : undefined
}

/**
 * Gemini's ACP tool calls carry no tool name (only a title for display): the name comes from
 * the call id, then maps exactly as in the one-shot parser (`mcp_<hostedKey>_<tool>` is the
 * hosted tool `<tool>`; a hosted tool Gemini renamed, one of `renamed`, is the catalog's).
 *
 * @internal
 */
export const namingWith =
  (renamed: Renamed, hostedTools?: ReadonlyArray<string>): AcpMap.Naming => (call, hostedKey) => {
    const name = call.name ?? functionName(call.toolCallId) ?? call.title ?? ""
    return onlyHosted(toolIdentity(name, hostedKey, renamed), name, hostedTools)
  }

/** {@link namingWith} for a process without renamed hosted tools. @internal */
export const naming: AcpMap.Naming = namingWith(new Map())

/** The UTC minute as Gemini CLI writes it into a chat file's name (`2026-12-01T08-36`). @internal */
export const minuteOf = (millis: number): string => new Date(millis).toISOString().slice(0, 16).replace(/:/g, "-")

const chatFile = /^session-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2})-([0-9a-f]{8})\.jsonl?$/

/**
 * How long to wait before loading session `id`. Gemini CLI 0.61's `session/load` starts a new
 * recording for the loaded id before it reads the session, and a recording's file is named
 * `session-<UTC minute>-<first 8 characters of the id>.jsonl`: within the minute the session's
 * file was created the two are the same file, the new recording resets its conversation and the
 * load fails with "No previous sessions found" (the session is lost). Zero unless one of the
 * session's files in the clone carries the current minute; then until the next minute (+100 ms).
 *
 * @internal
 */
export const loadDelay = (profileDir: string, id: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const root = path.join(profileDir, ".gemini", "tmp")
    const list = (dir: string) => fs.readDirectory(dir).pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))
    const minutes = new Set<string>()
    for (const project of yield* list(root)) {
      for (const name of yield* list(path.join(root, project, "chats"))) {
        const match = chatFile.exec(name)
        if (match !== null && match[2] === id.slice(0, 8)) minutes.add(match[1]!)
      }
    }
    const now = yield* Clock.currentTimeMillis
    return minutes.has(minuteOf(now)) ? 60_000 - (now % 60_000) + 100 : 0
  })

/** @internal */
export const defaults = {
  startTimeout: "2 minutes",
  hostedToolsTimeout: "20 seconds",
  cancelTimeout: "30 seconds"
} as const

/** What a one-shot turn's process is made of (`gemini.ts`'s `processSetup`). @internal */
export type Setup = (config: Config, request: Driver.InvocationRequest) => Effect.Effect<
  {
    readonly files: ReadonlyArray<Driver.MaterializedFile>
    readonly env: { readonly [name: string]: string }
    readonly model: ReadonlyArray<string>
    readonly options: ReadonlyArray<string>
  },
  Driver.ProtocolError,
  FileSystem.FileSystem | Path.Path
>

/** @internal */
export const live = (
  config: Config,
  binary: Binary.Binary,
  announce: Effect.Effect<void>,
  processSetup: Setup,
  renamedOf: (request: Driver.InvocationRequest) => Renamed
): Driver.Live => {
  const options: Acp.Options = {
    naming,
    startTimeout: config.live?.startTimeout ?? defaults.startTimeout,
    hostedToolsTimeout: config.live?.hostedToolsTimeout ?? defaults.hostedToolsTimeout,
    cancelTimeout: defaults.cancelTimeout,
    permission: Acp.denyPermission,
    sources: false
  }
  return {
    open: (request) =>
      Effect.gen(function*() {
        yield* announce
        if (request.session._tag === "Fork") {
          return yield* Effect.fail(
            new Driver.ProtocolError({ reason: "ProviderError", detail: "Gemini CLI cannot fork a session" })
          )
        }
        const setup = yield* processSetup(config, request)
        if (request.session._tag === "Resume") {
          const delay = yield* loadDelay(request.profileDir, request.session.id)
          if (delay > 0) {
            yield* Effect.logInfo("waiting for the next minute before Gemini CLI loads the session").pipe(
              Effect.annotateLogs({ session: request.session.id, delayMs: delay })
            )
            yield* Effect.sleep(delay)
          }
        }
        return {
          command: binary.command,
          args: [...binary.prefix, "--acp", ...setup.model, ...setup.options],
          commandSource: binary.source,
          env: setup.env,
          cwd: request.workspace,
          stdin: undefined,
          files: setup.files
        } satisfies Driver.Invocation
      }),
    // Core's approvals reach the agent's permission requests inside the ACP client itself.
    // The process serves one tool set (core reopens it for another), the request's.
    attach: (channel, context) =>
      Acp.attach(
        { ...options, naming: namingWith(renamedOf(context.request), context.request.hosted.tools) },
        channel,
        context
      )
  }
}
