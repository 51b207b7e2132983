/**
 * What an end-to-end test of an agent needs: the layers `Agent.make` requires, scoped temp
 * directories (a source profile, a clone root, a workspace), and the checks that nothing is
 * left behind (no marked process, no clone, the source byte-identical, the token revoked).
 *
 * @since 0.1.0
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Unstable from "@tether/core/Unstable"
import { Gateway } from "@tether/gateway"
import { Profile } from "@tether/profile"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Crypto from "node:crypto"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import * as Os from "node:os"
import * as NodePath from "node:path"

/**
 * Everything `Agent.make` needs besides the tool handlers and a `Scope`: the gateway and the
 * Node platform services (`CommandExecutor`, `FileSystem`, `Path`).
 *
 * @example
 * ```ts
 * import { it } from "@effect/vitest"
 * import { Agent } from "@tether/core"
 * import { Harness, Reference } from "@tether/testing"
 * import { Toolkit } from "@tether/tool"
 * import { Effect } from "effect"
 *
 * it.live("the agent answers", () =>
 *   Effect.gen(function*() {
 *     const sandbox = yield* Harness.sandbox // a temp source profile, clone root and workspace
 *     const agent = yield* Agent.make({
 *       driver: Reference.driver(),
 *       definition: { instructions: "", tools: Toolkit.empty },
 *       workspace: sandbox.workspace,
 *       profile: sandbox.selection
 *     })
 *     const result = yield* agent.run("hello")
 *   }).pipe(Effect.scoped, Effect.provide(Harness.layer)))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<
  Gateway.Gateway | CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path
> = Layer.merge(Gateway.layer(), NodeContext.layer)

/**
 * A registration as observed by `recordingGateway` (for revocation checks).
 *
 * @since 0.1.0
 * @category models
 */
export interface Observed {
  readonly url: string
  readonly token: Redacted.Redacted<string>
}

/**
 * What `recordingLayer` records besides each registration, and which gateway it wraps.
 *
 * @since 0.4.0
 * @category models
 */
export interface RecordingOptions {
  /**
   * Where each credential minted from a registration is recorded, in order: the per-process
   * tokens CLIs actually use (core mints one for each provider process).
   */
  readonly credentials?: Array<Observed>
  /** The layer whose gateway is wrapped (default `layer`): a subject's own layer is recorded too. */
  readonly base?: Layer.Layer<Gateway.Gateway | CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path>
}

/**
 * The gateway of `options.base` (default `layer`), wrapped so a test can see each registration's
 * URL and token in `observed` and, given `options.credentials`, each credential minted from it
 * there (to prove every token gets 401 after close). The lists are appended to as agents register
 * and mint.
 *
 * @since 0.1.0
 * @category layers
 */
export const recordingLayer = (
  observed: Array<Observed>,
  options: RecordingOptions = {}
): Layer.Layer<Gateway.Gateway | CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path> => {
  const base = options.base ?? layer
  const credentials = options.credentials
  return Layer.merge(
    base,
    // Built from the same (memoized) `base`: its Gateway replaces base's in the merged context.
    Layer.effect(
      Gateway.Gateway,
      Effect.map(Gateway.Gateway, (gateway) => ({
        ...gateway,
        register: (executor) =>
          Effect.map(gateway.register(executor), (registration) => {
            observed.push({ url: registration.url, token: registration.token })
            return credentials === undefined ? registration : {
              ...registration,
              credential: (credentialOptions) =>
                Effect.tap(registration.credential(credentialOptions), (credential) =>
                  Effect.sync(() => credentials.push({ url: registration.url, token: credential.token })))
            }
          })
      }))
    ).pipe(Layer.provide(base))
  )
}

/**
 * Scoped temp directories: `source` (a provider profile with a settings file), `root` (where
 * clones go), `workspace`. All removed when the scope closes.
 *
 * @since 0.1.0
 * @category models
 */
export interface Sandbox {
  readonly base: string
  readonly source: string
  readonly root: string
  readonly workspace: string
  readonly selection: Profile.Selection
}

/**
 * A fresh temporary sandbox for one test: a source profile (with a settings file and a fake
 * credential), a clone root, a session store and a workspace, all removed when the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sandbox: Effect.Effect<Sandbox, never, Scope.Scope> = Effect.acquireRelease(
  Effect.promise(async () => {
    const base = await Fs.realpath(await Fs.mkdtemp(NodePath.join(Os.tmpdir(), "tether-test-")))
    const source = NodePath.join(base, "source")
    const root = NodePath.join(base, "clones")
    const workspace = NodePath.join(base, "workspace")
    await Fs.mkdir(source, { mode: 0o700 })
    await Fs.mkdir(workspace)
    await Fs.writeFile(NodePath.join(source, "settings.json"), "{\"theme\":\"dark\"}\n", { mode: 0o600 })
    await Fs.writeFile(NodePath.join(source, "auth.json"), "{\"token\":\"source-secret\"}\n", { mode: 0o600 })
    // The session store lives in the sandbox too, so nothing outlives it.
    const sessions = NodePath.join(base, "sessions")
    return { base, source, root, workspace, selection: Profile.cloneFrom(source, root, { sessions }) }
  }),
  (sandbox) => Effect.promise(() => Fs.rm(sandbox.base, { recursive: true, force: true }))
)

/**
 * A digest of a directory tree: every entry's relative path, type, mode and content (symlinks by
 * their target). Two equal digests mean byte-identical trees.
 *
 * @since 0.1.0
 * @category checks
 */
export const treeDigest = (dir: string): Effect.Effect<string> =>
  Effect.promise(async () => {
    const hash = Crypto.createHash("sha256")
    const walk = async (relative: string): Promise<void> => {
      const full = NodePath.join(dir, relative)
      const info = await Fs.lstat(full)
      hash.update(`${relative}\0${info.mode}\0`)
      if (info.isSymbolicLink()) hash.update(`link:${await Fs.readlink(full)}\0`)
      else if (info.isFile()) hash.update(await Fs.readFile(full))
      else if (info.isDirectory()) {
        for (const name of (await Fs.readdir(full)).sort()) await walk(NodePath.join(relative, name))
      }
    }
    await walk(".")
    return hash.digest("hex")
  })

/**
 * The entries of a directory (`[]` when it does not exist).
 *
 * @since 0.1.0
 * @category checks
 */
export const entries = (dir: string): Effect.Effect<ReadonlyArray<string>> =>
  Effect.promise(() => Fs.readdir(dir).catch(() => []))

/**
 * The pids of live (non-zombie) processes carrying the agent's marker in their environment.
 *
 * @since 0.1.0
 * @category checks
 */
export const markedProcesses = (marker: string): Effect.Effect<ReadonlyArray<number>> =>
  Effect.sync(() => {
    const needle = Buffer.from(`${Unstable.markerVariable}=${marker}\0`)
    const found: Array<number> = []
    for (const entry of FsSync.readdirSync("/proc")) {
      if (!/^[0-9]+$/.test(entry)) continue
      try {
        const environ = FsSync.readFileSync(`/proc/${entry}/environ`)
        const index = environ.indexOf(needle)
        if (index === 0 || (index > 0 && environ[index - 1] === 0)) found.push(Number(entry))
      } catch {
        // gone or unreadable
      }
    }
    return found
  })

/**
 * Whether a pid is a live process (zombies count as gone).
 *
 * @since 0.1.0
 * @category checks
 */
export const isAlive = (pid: number): Effect.Effect<boolean> =>
  Effect.promise(async () => {
    try {
      const stat = await Fs.readFile(`/proc/${pid}/stat`, "utf8")
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
      return state !== "Z" && state !== "X"
    } catch {
      return false
    }
  })

/**
 * POSTs an MCP `tools/list` to the gateway with the token and returns the HTTP status
 * (200 while the registration is live, 401 once revoked, 0 when the listener is gone).
 *
 * @since 0.1.0
 * @category checks
 */
export const probe = (observed: Observed): Effect.Effect<number> =>
  Effect.async<number>((resume) => {
    const url = new URL(observed.url)
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} })
    const request = Http.request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: "POST",
      headers: {
        host: url.host,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        authorization: `Bearer ${Redacted.value(observed.token)}`,
        "content-length": Buffer.byteLength(body)
      }
    }, (response) => {
      response.resume()
      response.on("end", () => resume(Effect.succeed(response.statusCode ?? 0)))
    })
    request.on("error", () => resume(Effect.succeed(0)))
    request.end(body)
  })
