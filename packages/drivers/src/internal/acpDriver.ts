/**
 * The generic ACP driver: any agent that speaks the Agent Client Protocol over stdio, through
 * Tether's one ACP client (`acp.ts`).
 *
 * - Live (`driver.live`): the agent itself is the long-lived process; `attach` is the ACP client.
 * - One-shot (`prepare` / `parse`): ACP has no one-shot mode (the session id the prompt needs is
 *   the agent's answer to `session/new`, and the hosted token goes inside that request or, with
 *   `headerSecrets: "environment"`, in the agent's environment, which the runner builds). The
 *   invocation therefore runs the turn runner (`acpTurn.ts`) with this Node: it spawns the agent
 *   as its child in the same process group, drives one turn with the same ACP
 *   client, relays the agent's stdout verbatim (what `parse` reads) and ends the agent. Its
 *   permission requests go to the run's approver tool on the gateway (`acpApproval.ts`) when the
 *   agent has approvals.
 *
 * @internal
 */
import * as Driver from "@tether/core/Driver"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"
import { createRequire } from "node:module"
import * as NodePath from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import type { Config } from "../Acp.js"
import * as Acp from "./acp.js"
import * as AcpApproval from "./acpApproval.js"
import * as AcpMap from "./acpMap.js"
import * as Binary from "./binary.js"
import * as Env from "./env.js"

/** @internal */
export const defaults = {
  startTimeout: "2 minutes",
  hostedToolsTimeout: "20 seconds",
  cancelTimeout: "30 seconds"
} as const

/** What the turn runner reads on its stdin. @internal */
export interface TurnSpec {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly request: Omit<Driver.InvocationRequest, "hostEnv">
  /** The driver's naming when it is a known one (`AcpMap.namings`), else `custom`. */
  readonly naming: string
  readonly headerSecrets: Acp.HeaderSecrets
  readonly startTimeoutMs: number
  readonly cancelTimeoutMs: number
}

/** The prefix of a line the turn runner writes to stderr when the turn could not run. @internal */
export const failurePrefix = "tether-acp-turn: "

const providerError = (detail: string) => new Driver.ProtocolError({ reason: "ProviderError", detail })

/** @internal */
export const capabilitiesOf = (config: Config): Driver.Capabilities => ({
  resume: config.resume ?? true,
  fork: false,
  mcpTransports: config.mcpTransports ?? ["stdio", "http"],
  instructions: false,
  skillsProjection: false,
  sandbox: [],
  toolAllowList: false,
  streamingInput: false,
  structuredOutput: "instruction",
  liveStructuredOutput: "instruction",
  persistentProcess: true
})

/**
 * Where the turn runner is and how to start it: the source through tsx (the repository's tests),
 * the built file beside this one, or, when an app bundled this module into a file of its own
 * (`import.meta.url` is then the bundle's), the built file of the installed package.
 */
const runner = (): ReadonlyArray<string> => {
  const url = import.meta.url
  const here = url.startsWith("file:") ? fileURLToPath(url) : url
  const dir = NodePath.dirname(here)
  if (here.endsWith(".ts")) {
    const tsx = pathToFileURL(createRequire(here).resolve("tsx")).href
    return ["--conditions=@tether/source", "--import", tsx, NodePath.join(dir, "acpTurn.ts")]
  }
  const beside = NodePath.join(dir, "acpTurn.js")
  if (NodeFs.existsSync(beside)) return [beside]
  const installed = NodePath.dirname(createRequire(here).resolve("@tether/drivers/package.json"))
  return [NodePath.join(installed, "build", "esm", "internal", "acpTurn.js")]
}

/** Checks what no ACP agent can honour and builds the agent's environment. */
const processEnv = (config: Config, request: Driver.InvocationRequest) =>
  Effect.gen(function*() {
    if (request.sandbox !== undefined) {
      return yield* Effect.fail(providerError(`an ACP agent cannot honour sandbox level "${request.sandbox}"`))
    }
    if (request.model !== undefined) {
      return yield* Effect.fail(
        providerError(
          `ACP has no stable model selection: configure the agent's model (its arguments or environment), not "${request.model}"`
        )
      )
    }
    if (request.session._tag === "Fork") return yield* Effect.fail(providerError("ACP cannot fork a session"))
    const provider: { [name: string]: string } = {}
    for (const name of config.layout.selectorEnv) provider[name] = request.profileDir
    const home = request.siblings["home"]
    const tmp = request.siblings["tmp"]
    if (home !== undefined) provider["HOME"] = home
    if (tmp !== undefined) provider["TMPDIR"] = tmp
    return Env.buildEnv(config, request, provider)
  })

/** @internal */
export const classifyExit = (info: Driver.ExitInfo): Driver.ProtocolError | undefined => {
  const lines = info.stderr.split("\n").map((l) => l.trimEnd())
  const line = lines.find((l) => l.startsWith(failurePrefix))
  if (line === undefined) return undefined
  // The agent's own last words (the runner relays its stderr), which core scrubs with the rest.
  const said = lines.filter((l) => l !== "" && !l.startsWith(failurePrefix)).slice(-8).join("\n")
  const tail = said === "" ? "" : `; the end of the agent's stderr:\n${said}`
  const match = /^(HostedToolsUnavailable|ResumeRejected|MalformedOutput|ProviderError): (.*)$/s.exec(
    line.slice(failurePrefix.length)
  )
  return match === null
    ? providerError(line.slice(failurePrefix.length) + tail)
    : new Driver.ProtocolError({ reason: match[1] as Driver.ProtocolError["reason"], detail: match[2]! + tail })
}

/**
 * Whether `command` can be started as the runner would start it: a path (resolved against `cwd`)
 * to an executable file, or a bare name found so on `path`.
 */
const startable = (command: string, path: string | undefined, cwd: string): boolean =>
  command.includes("/")
    ? Binary.isFile(NodePath.resolve(cwd, command), true)
    : (path ?? "").split(":").some((dir) => dir !== "" && Binary.isFile(NodePath.join(dir, command), true))

/**
 * The one-shot parse: the relayed stdout of the agent. A resumed session starts at the result of
 * `session/load` (which carries no session id); the history the agent replays before it is not
 * this turn's.
 *
 * @internal
 */
export const parse = (naming: AcpMap.Naming): Driver.Driver["parse"] => AcpMap.parseWith(naming)

/** @internal */
export const driver = (config: Config): Driver.Driver => {
  const naming = config.naming ?? AcpMap.genericNaming
  const name = config.name ?? "acp"
  const headerSecrets: Acp.HeaderSecrets = config.headerSecrets ??
    (naming === AcpMap.claudeNaming ? "environment" : "inline")
  const options: Acp.Options = {
    naming,
    startTimeout: config.live?.startTimeout ?? defaults.startTimeout,
    hostedToolsTimeout: config.live?.hostedToolsTimeout ?? defaults.hostedToolsTimeout,
    cancelTimeout: config.live?.cancelTimeout ?? defaults.cancelTimeout,
    permission: Acp.denyPermission,
    sources: true,
    headerSecrets
  }
  const args = config.args ?? []
  return {
    name,
    capabilities: capabilitiesOf(config),
    layout: config.layout,
    ...(config.sessionConfig === undefined ? {} : { sessionConfig: config.sessionConfig }),
    prepare: (request) =>
      Effect.gen(function*() {
        const env = yield* processEnv(config, request)
        if (!startable(config.command, env["PATH"], request.workspace)) {
          // Spawned as it is, the agent's command fails core's spawn: `SpawnFailed` naming it,
          // with the install hint, as on a live thread (the runner could only report it after
          // starting).
          return {
            command: config.command,
            commandSource: "the ACP agent's command",
            args,
            env,
            cwd: request.workspace,
            stdin: undefined,
            files: []
          } satisfies Driver.Invocation
        }
        const { hostEnv: _, ...rest } = request
        const spec: TurnSpec = {
          command: config.command,
          args,
          request: rest,
          naming: AcpMap.namingId(naming) ?? "custom",
          headerSecrets,
          startTimeoutMs: Duration.toMillis(Duration.decode(options.startTimeout)),
          cancelTimeoutMs: Duration.toMillis(Duration.decode(options.cancelTimeout))
        }
        return {
          command: process.execPath,
          commandSource: `the ACP turn runner with this Node, spawning ${config.command}`,
          args: runner(),
          env,
          cwd: request.workspace,
          stdin: JSON.stringify(spec),
          files: []
        } satisfies Driver.Invocation
      }),
    parse: parse(naming),
    classifyExit,
    live: {
      open: (request) =>
        Effect.map(processEnv(config, request), (env) => ({
          command: config.command,
          args,
          env,
          cwd: request.workspace,
          stdin: undefined,
          files: []
        })),
      attach: (channel, context) => Acp.attach(options, channel, context)
    },
    // The live session asks `session/request_permission` of core's approvals directly; the turn
    // runner of a one-shot turn asks them through the run's approver tool on the gateway.
    approvals: { tool: AcpApproval.approverTool, live: true },
    ...(config.install === undefined ? {} : { install: config.install })
  }
}
