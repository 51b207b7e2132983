/**
 * Threads: a conversation under the host's own key. `agent.thread(key)` continues the committed
 * provider session, or starts one (continue-or-start); checkpoints live in a `ThreadStore`, here
 * SQLite so they outlive the host process (`ThreadStore.layerMemory` is the default). A thread
 * handle can be closed and the key reopened with `resumeOnly`; `fork` continues the history under
 * a new key and a new session; an unknown key with `resumeOnly` is the typed `ThreadNotFound`.
 * Finally the agent is closed and rebuilt, as after a host restart, and the thread resumes.
 *
 *   node --conditions=@tether/source --import tsx examples/threads.ts [--driver claude|codex|gemini]
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Agent } from "@tether/core"
import * as SqlThreadStore from "@tether/core/SqlThreadStore"
import { Profile } from "@tether/profile"
import { Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Model from "./support/model.js"
import * as View from "./support/view.js"

// The scripted model answers from the conversation the CLI sends it.
const script: Model.Model = ({ prompt, history }) => {
  if (prompt.includes("codename is")) return Model.answer("Noted: BLUEBIRD.")
  const known = /codename is (\w+)/.exec(history)?.[1]
  return Model.answer(known === undefined ? "I do not know any codename." : `The codename is ${known}.`)
}

const line = (label: string, text: string, session: string | undefined) =>
  View.write(`${View.bold(label.padEnd(8))} ${text}  ${View.dim(`session ${session}`)}\n`)

const program = Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  const driver = yield* Model.offline(Model.driverArg(), script)
  // The CLI's own session files are kept per profile identity in a sessions directory (by default
  // `Profile.defaultSessionsRoot()`), so a rebuilt agent's fresh clone can resume them.
  const profile = Profile.cloneFrom(sandbox.source, sandbox.root, { sessions: Path.join(sandbox.base, "sessions") })
  const makeAgent = Agent.make({
    driver,
    definition: { instructions: "You are a release assistant.", skills: [], tools: Toolkit.empty },
    workspace: sandbox.workspace,
    profile
  })
  const key = "tenant-42/release-7"
  const { a, b, c, record, forked, missing } = yield* Effect.scoped(Effect.gen(function*() {
    const agent = yield* makeAgent

    const thread = yield* agent.thread(key)
    const a = yield* thread.run("Remember: the codename is BLUEBIRD.")
    line("turn 1", a.text, a.session)
    const b = yield* thread.run("What is the codename?")
    line("turn 2", b.text, b.session)
    yield* thread.close // the handle only: the agent and the committed record stay

    const reopened = yield* agent.thread(key, { resumeOnly: true })
    const c = yield* reopened.run("Remind me of the codename.")
    line("resumed", c.text, c.session)
    const record = yield* reopened.snapshot

    const forked = driver.capabilities.fork
      ? yield* Effect.flatMap(reopened.fork(`${key}/what-if`), (fork) => fork.run("And the codename again?"))
      : undefined
    if (forked !== undefined) line("fork", forked.text, forked.session)
    const missing = yield* Effect.flip(agent.thread("no-such-thread", { resumeOnly: true }))
    return { a, b, c, record, forked, missing }
  }))

  // A host restart: the agent is closed (clone removed, token revoked) and rebuilt on a new
  // gateway port with a new token; the checkpoint comes from the SQLite store.
  View.write(View.dim("agent closed and rebuilt\n"))
  const d = yield* Effect.scoped(Effect.flatMap(
    makeAgent,
    (agent) =>
      Effect.flatMap(
        agent.thread(key, { resumeOnly: true }),
        (thread) => thread.run("After the restart: the codename?")
      )
  ))
  line("rebuilt", d.text, d.session)

  const check = View.checks()
  check.claim("turn 2 continued turn 1's session", b.session === a.session && b.text.includes("BLUEBIRD"))
  check.claim("the reopened key resumed the same session", c.session === a.session && c.text.includes("BLUEBIRD"))
  check.claim(
    "the stored checkpoint counts three turns",
    Option.match(record, { onNone: () => false, onSome: (r) => r.session === a.session && r.turns === 3 })
  )
  if (forked !== undefined) {
    check.claim(
      "the fork kept the history under a new session",
      forked.session !== a.session && forked.text.includes("BLUEBIRD")
    )
  }
  check.claim("an unknown key with resumeOnly is ThreadNotFound", missing._tag === "ThreadNotFound")
  check.claim("a rebuilt agent resumed the same session", d.session === a.session && d.text.includes("BLUEBIRD"))
  check.conclude(
    "threads: continued, stored in SQLite, resumed by key" + (forked === undefined ? "" : ", forked") +
      " and after a rebuild"
  )
}).pipe(Effect.scoped)

// The SQLite store lives in a temp file here; a real host keeps it (or uses PostgreSQL).
const dbDir = Fs.mkdtempSync(Path.join(process.env["TMPDIR"] ?? "/tmp", "tether-threads-"))
const Store = SqlThreadStore.layer.pipe(Layer.provide(SqliteClient.layer({ filename: Path.join(dbDir, "threads.db") })))

Effect.runPromise(program.pipe(Effect.provide([Harness.layer, Store]))).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
}).finally(() => Fs.rmSync(dbDir, { recursive: true, force: true }))
