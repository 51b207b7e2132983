/** @internal */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Driver from "@tether/core/Driver"
import type { ProfileLayout } from "@tether/profile/ProfileLayout"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Crypto from "node:crypto"
import type { Config, TomlTable } from "../Codex.js"
import * as Binary from "./binary.js"
import * as codexConfig from "./codexConfig.js"
import * as codexLive from "./codexLive.js"
import * as parser from "./codexParse.js"
import * as Env from "./env.js"
import * as Skills from "./skills.js"
import * as StrictSchema from "./strictSchema.js"

/** @internal */
export const capabilities: Driver.Capabilities = {
  resume: true,
  fork: true,
  mcpTransports: ["stdio", "http"],
  instructions: true,
  skillsProjection: true,
  sandbox: ["readOnly", "workspaceWrite", "unrestricted"],
  toolAllowList: true,
  streamingInput: true,
  structuredOutput: "native",
  // `app-server` takes a turn's JSON Schema in `turn/start.outputSchema`.
  liveStructuredOutput: "native",
  persistentProcess: true,
  builtinToolPolicy: ["deny"]
}

/**
 * Where a `runAs` turn's JSON Schema is written for `--output-schema`: named by its content, so
 * overlapping turns of one agent never read each other's schema from the shared clone (turns
 * with the same schema share identical bytes). @internal
 */
export const outputSchemaFile = (content: string): string =>
  `.tether-output-schema-${Crypto.createHash("sha256").update(content).digest("hex").slice(0, 32)}.json`

/** @internal */
export const layout: ProfileLayout = {
  provider: "codex",
  selectorEnv: ["CODEX_HOME"],
  nativeDefault: (env) => `${env["HOME"] ?? ""}/.codex`,
  classes: {
    // Not the user's execpolicy `rules/`: an `allow` rule there runs a command unasked (the
    // host's approvals never hear of it) and outside the turn's sandbox (a `readOnly` turn wrote).
    settings: ["config.toml", "*.config.toml", "AGENTS.md", "AGENTS.override.md", "prompts/**"],
    mcp: [],
    skills: ["skills/**"],
    auth: ["auth.json"],
    sessions: ["sessions/**"]
  },
  // `sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`.
  sessionOf: (path) =>
    /^sessions\/.*-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$/.exec(path)?.[1],
  reserved: [codexConfig.userConfigFile, ".tether-output-schema-*.json"],
  siblings: ["home", "tmp"]
}

/** @internal */
export const offlineSettings: TomlTable = {
  check_for_update_on_startup: false,
  features: { plugins: false, apps: false },
  analytics: { enabled: false },
  feedback: { enabled: false }
}

/** Host variables always passed through when set. */

/** Codex's name of each sandbox level (`sandbox_mode`, and `SandboxMode` on the app-server). @internal */
export const sandboxMode = {
  readOnly: "read-only",
  workspaceWrite: "workspace-write",
  unrestricted: "danger-full-access"
} as const

const protocolError = (detail: string) => new Driver.ProtocolError({ reason: "ProviderError", detail })

/** The Rust target triple of the platform packages of `@openai/codex`. */
const targetTriple = (platform: string, arch: string): string | undefined => {
  const cpu = arch === "x64" ? "x86_64" : arch === "arm64" ? "aarch64" : undefined
  if (cpu === undefined) return undefined
  switch (platform) {
    case "linux":
    case "android":
      return `${cpu}-unknown-linux-musl`
    case "darwin":
      return `${cpu}-apple-darwin`
    case "win32":
      return `${cpu}-pc-windows-msvc`
    default:
      return undefined
  }
}

/**
 * The CLI, best first: the native binary of the platform package (`@openai/codex-<os>-<cpu>`,
 * about 80 ms per turn faster than the launcher), the one vendored in `@openai/codex` itself,
 * then the npm Node launcher (`bin/codex.js`) run with this Node.
 *
 * @internal
 */
export const binarySpec: Binary.Spec = {
  packageName: "@openai/codex",
  pathName: "codex",
  candidates: (installed) => {
    const triple = targetTriple(process.platform, process.arch)
    const exe = process.platform === "win32" ? "codex.exe" : "codex"
    const vendored = (dir: string) => ({ file: `${dir}/vendor/${triple}/bin/${exe}`, script: false })
    const platformDir = installed.resolvePackage(
      `@openai/codex-${process.platform === "android" ? "linux" : process.platform}-${process.arch}`
    )
    return [
      ...(triple === undefined ? [] : [
        ...(platformDir === undefined ? [] : [vendored(platformDir)]),
        vendored(installed.dir)
      ]),
      ...(installed.bin["codex"] === undefined
        ? []
        : [{ file: `${installed.dir}/${installed.bin["codex"]}`, script: true }])
    ]
  }
}

/** @internal */
export const defaultMaxReconnects = 2

const buildEnv = (config: Config, request: Driver.InvocationRequest, home: string, tmp: string) => {
  const apiKey = config.modelProvider?.apiKey
  return Env.buildEnv(config, request, {
    HOME: home,
    CODEX_HOME: request.profileDir,
    // Outside CODEX_HOME, or Codex refuses to create its helper aliases (apply_patch, sandbox).
    TMPDIR: tmp,
    // The provider's key, unwrapped only here, at the syscall boundary.
    ...(apiKey === undefined ? {} : { [codexConfig.apiKeyVariable]: Redacted.value(apiKey) })
  })
}

const subcommand = (session: Driver.SessionRequest): ReadonlyArray<string> => {
  switch (session._tag) {
    case "New":
      return ["exec"]
    case "Resume":
      return ["exec", "resume"]
    case "Fork":
      return ["exec", "fork"]
  }
}

/** Reads the user's settings: the saved original after the first turn, else the copied file. */
const userSettings = (profileDir: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const saved = path.join(profileDir, codexConfig.userConfigFile)
    const copied = path.join(profileDir, codexConfig.configFile)
    const read = (file: string) =>
      fs.exists(file).pipe(
        Effect.flatMap((exists) =>
          exists ? Effect.map(fs.readFileString(file), (text) => text) : Effect.succeed(undefined)
        ),
        Effect.mapError((error) => protocolError(`cannot read ${file}: ${error.message}`))
      )
    // `config.toml` first, then the saved copy: a first turn saves the user's file before it
    // renders `config.toml` (one batch, written in order), so a `config.toml` read here that is
    // already a rendering (another first turn of the agent ran meanwhile) always finds the saved
    // copy next, and is never taken for the user's.
    const current = yield* Effect.either(read(copied))
    const original = yield* read(saved)
    if (original !== undefined) return { text: original, firstTurn: false }
    if (current._tag === "Left") return yield* Effect.fail(current.left)
    return { text: current.right ?? "", firstTurn: true }
  })

/**
 * What `exec` and `app-server` share for one run: the binary, the clone's files (the user's
 * settings saved on the first turn, the rendered `config.toml`, projected skills), the
 * environment, and the `--config` overrides of the run (sandbox level, hosted-tool allow-list).
 *
 * @internal
 */
export interface Materialized {
  readonly binary: Binary.Binary
  readonly env: { readonly [name: string]: string }
  readonly files: ReadonlyArray<Driver.MaterializedFile>
  /** `key=<TOML value>` overrides, each given after `--config` (`-c`). */
  readonly overrides: ReadonlyArray<string>
}

/**
 * The configuration that removes each built-in tool Codex 0.171 offers, by the name the model
 * sees (`exec_command` and `write_stdin` are the unified shell; denying one removes both).
 *
 * @internal
 */
export const builtinSwitches: { readonly [name: string]: ReadonlyArray<string> } = {
  exec_command: ["features.shell_tool=false"],
  write_stdin: ["features.shell_tool=false"],
  view_image: ["features.view_image=false"],
  web_search: ["web_search=\"disabled\""]
}

/** @internal */
export const materialize = (config: Config, binary: Binary.Binary) => (request: Driver.InvocationRequest) =>
  Effect.gen(function*() {
    const home = request.siblings["home"]
    const tmp = request.siblings["tmp"]
    if (home === undefined || tmp === undefined) {
      return yield* Effect.fail(protocolError("the execution clone has no `home` and `tmp` siblings"))
    }
    const user = yield* userSettings(request.profileDir)
    const settings = yield* codexConfig.parseUserConfig(user.text)
    const files: Array<Driver.MaterializedFile> = []
    if (user.firstTurn) files.push({ path: codexConfig.userConfigFile, content: user.text, mode: 0o600 })
    files.push({
      path: codexConfig.configFile,
      content: yield* codexConfig.render(config, request, settings),
      mode: 0o600
    })
    files.push(...Skills.project(request.skills, "skills"))
    const overrides: Array<string> = []
    if (request.sandbox !== undefined) overrides.push(`sandbox_mode="${sandboxMode[request.sandbox]}"`)
    overrides.push(codexConfig.enabledToolsOverride(request))
    // The turn's denied built-ins, each switched off for this run.
    for (const name of request.builtinTools?.deny ?? []) {
      const switches = Object.hasOwn(builtinSwitches, name) ? builtinSwitches[name] : undefined
      if (switches === undefined) {
        return yield* Effect.fail(protocolError(
          `Codex cannot deny the built-in tool "${name}" (it can deny: ${Object.keys(builtinSwitches).join(", ")})`
        ))
      }
      overrides.push(...switches)
    }
    return { binary, env: buildEnv(config, request, home, tmp), files, overrides } satisfies Materialized
  })

/** @internal */
export const prepare = (config: Config, binary: Binary.Binary) => (request: Driver.InvocationRequest) =>
  Effect.gen(function*() {
    const { env, files, overrides } = yield* materialize(config, binary)(request)
    const args: Array<string> = [...subcommand(request.session), "--json", "--skip-git-repo-check"]
    const model = request.model ?? config.model
    if (model !== undefined) args.push("--model", model)
    for (const override of overrides) args.push("--config", override)
    const outputSchemaFiles: Array<Driver.MaterializedFile> = []
    if (request.outputSchema !== undefined) {
      // Codex sends it as the model's strict `text.format` json_schema, which must list every
      // property as required (optional ones become nullable; the parser undoes it). Codex does
      // not validate the reply against it: Tether does.
      const content = JSON.stringify(StrictSchema.strict(request.outputSchema))
      const file = outputSchemaFile(content)
      outputSchemaFiles.push({ path: file, content, mode: 0o600 })
      args.push("--output-schema", (yield* Path.Path).join(request.profileDir, file))
    }
    args.push("--")
    if (request.session._tag === "Resume") args.push(request.session.id)
    if (request.session._tag === "Fork") args.push(request.session.from)
    // The prompt goes on stdin (`-`), never in argv: argv is readable by every local user through
    // /proc and limited to 128 KiB per argument. Stdin is closed after it.
    args.push("-")
    return {
      command: binary.command,
      args: [...binary.prefix, ...args],
      commandSource: binary.source,
      env,
      cwd: request.workspace,
      stdin: request.prompt,
      files: [...files, ...outputSchemaFiles]
    } satisfies Driver.Invocation
  })

/**
 * What enters threads' compatibility fingerprint (DESIGN §10): what decides the conversation a
 * resumed session continues. The model, the model provider by its id and name (another provider
 * serves another conversation; its base URL is where it is reached, and its key is a secret), and
 * the settings merged into the clone's `config.toml` (they are the materialized settings). Never
 * `env`, the binary or the reconnect bound. Absent when none is set, as before the driver had one,
 * so those agents' threads still resume.
 *
 * @internal
 */
export const sessionConfig = (config: Config): { readonly [key: string]: unknown } | undefined => {
  const out: { [key: string]: unknown } = {}
  if (config.model !== undefined) out["model"] = config.model
  if (config.modelProvider !== undefined) {
    out["modelProvider"] = {
      id: config.modelProvider.id,
      ...(config.modelProvider.name === undefined ? {} : { name: config.modelProvider.name })
    }
  }
  if (config.settings !== undefined) out["settings"] = config.settings
  return Object.keys(out).length === 0 ? undefined : out
}

/** @internal */
export const driver = (config: Config = {}): Driver.Driver => {
  const binary = Binary.resolve(binarySpec, config.binary)
  const announce = Binary.announce("codex", binary)
  const prepareTurn = prepare(config, binary)
  const materializeRun = materialize(config, binary)
  const session = sessionConfig(config)
  return {
    name: "codex",
    capabilities,
    ...(session === undefined ? {} : { sessionConfig: session }),
    layout,
    prepare: (request) => Effect.zipRight(announce, prepareTurn(request)),
    parse: parser.parseWith({ maxReconnects: config.maxReconnects ?? defaultMaxReconnects }),
    classifyExit: parser.classifyExit,
    // Codex always sends a `runAs` schema strict: one OpenAI's strict mode refuses goes by instruction.
    outputSchemaRefusal: (jsonSchema) => StrictSchema.refusal(StrictSchema.strict(jsonSchema)),
    // Asked on live threads only (the app-server's approval requests); `codex exec` has no prompt to route.
    approvals: { live: true },
    install: "install it with `npm install @openai/codex`",
    live: codexLive.make({
      config,
      materialize: (request) => Effect.zipRight(announce, materializeRun(request)),
      maxReconnects: config.maxReconnects ?? defaultMaxReconnects
    })
  }
}
