/**
 * Threads: a conversation under the host's own key. `agent.thread(key)` continues the committed
 * provider session, or starts one (continue-or-start); checkpoints live in a `ThreadStore`, here
 * SQLite so they outlive the host process (`ThreadStore.layerMemory` is the default). A thread
 * handle can be closed and the key reopened with `resumeOnly`; `fork` continues the history under
 * a new key and a new session; an unknown key with `resumeOnly` is the typed `ThreadNotFound`.
 * Every turn says how it opened its session (`Result.thread`, the `ThreadOpened` event). The agent
 * is closed and rebuilt, as after a host restart, and the thread resumes. Last, an agent with other
 * instructions cannot resume it: its turn restarts the thread and says why, by name, and the
 * replaced checkpoint stays readable in the key's history.
 *
 *   node --conditions=@tether/source --import tsx examples/threads.ts [--driver claude|codex|gemini]
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as FileSystem from "@effect/platform/FileSystem"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Agent, type Result } from "@tether/core"
import * as SqlThreadStore from "@tether/core/SqlThreadStore"
import { Profile } from "@tether/profile"
import { Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Path from "node:path"
import * as Model from "./support/model.js"
import * as View from "./support/view.js"

// The scripted model answers from the conversation the CLI sends it.
const script: Model.Model = ({ prompt, history }) => {
  if (prompt.includes("codename is")) return Model.answer("Noted: BLUEBIRD.")
  const known = /codename is (\w+)/.exec(history)?.[1]
  return Model.answer(known === undefined ? "I do not know any codename." : `The codename is ${known}.`)
}

const line = (label: string, result: { readonly text: string; readonly session?: string | undefined }) =>
  View.write(`${View.bold(label.padEnd(8))} ${result.text}  ${View.dim(`session ${result.session}`)}\n`)

const program = Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  const driver = yield* Model.offline(Model.driverArg(), script)
  // The CLI's own session files are kept per profile identity in a sessions directory (by default
  // `Profile.defaultSessionsRoot()`), so a rebuilt agent's fresh clone can resume them.
  const profile = Profile.cloneFrom(sandbox.source, sandbox.root, { sessions: Path.join(sandbox.base, "sessions") })
  const makeAgent = (instructions = "You are a release assistant.") =>
    Agent.make({
      driver,
      definition: { instructions, skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile
    })
  const key = "tenant-42/release-7"
  const { a, b, c, record, forked, missing } = yield* Effect.scoped(Effect.gen(function*() {
    const agent = yield* makeAgent()

    const thread = yield* agent.thread(key)
    const a = yield* thread.run("Remember: the codename is BLUEBIRD.")
    line("turn 1", a)
    const b = yield* thread.run("What is the codename?")
    line("turn 2", b)
    yield* thread.close // the handle only: the agent and the committed record stay

    const reopened = yield* agent.thread(key, { resumeOnly: true })
    const c = yield* reopened.run("Remind me of the codename.")
    line("resumed", c)
    const record = yield* reopened.snapshot

    const forked = driver.capabilities.fork
      ? yield* Effect.flatMap(reopened.fork(`${key}/what-if`), (fork) => fork.run("And the codename again?"))
      : undefined
    if (forked !== undefined) line("fork", forked)
    const missing = yield* Effect.flip(agent.thread("no-such-thread", { resumeOnly: true }))
    return { a, b, c, record, forked, missing }
  }))

  // A host restart: the agent is closed (clone removed, token revoked) and rebuilt on a new
  // gateway port with a new token; the checkpoint comes from the SQLite store.
  View.write(View.dim("agent closed and rebuilt\n"))
  const d = yield* Effect.scoped(Effect.flatMap(
    makeAgent(),
    (agent) =>
      Effect.flatMap(
        agent.thread(key, { resumeOnly: true }),
        (thread) => thread.run("After the restart: the codename?")
      )
  ))
  line("rebuilt", d)

  // Another definition cannot continue that conversation: the turn restarts the thread, says so
  // (before the CLI starts) and keeps the replaced checkpoint in the key's history.
  const { e, history } = yield* Effect.scoped(Effect.gen(function*() {
    const agent = yield* makeAgent("You are a release assistant. Answer in one word.")
    const thread = yield* agent.thread(key)
    const e = yield* thread.stream("What is the codename?").pipe(
      Stream.tap(View.make().onEvent),
      Stream.runFold(
        undefined as Result.Result | undefined,
        (last, event) => event._tag === "RunFinished" ? event.result : last
      ),
      Effect.map((result) => result!)
    )
    return { e, history: yield* thread.history }
  }))
  line("restart", e)

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
  check.claim(
    "each turn said how it opened: started, resumed, forked",
    a.thread?.mode === "started" && b.thread?.mode === "resumed" && d.thread?.mode === "resumed" &&
      (forked === undefined || forked.thread?.mode === "forked")
  )
  check.claim(
    "other instructions restarted the thread, naming them, and kept the old checkpoint",
    e.thread?.mode === "restarted" && e.thread.reason?._tag === "Incompatible" &&
      e.thread.reason.components.includes("instructions") && e.session !== a.session &&
      history[0]?.record.session === a.session
  )
  check.conclude(
    "threads: continued, stored in SQLite, resumed by key" + (forked === undefined ? "" : ", forked") +
      " and after a rebuild; a restart is announced and reversible"
  )
}).pipe(Effect.scoped)

// The SQLite store lives in a temp directory here (removed with the program's scope); a real
// host keeps it (or uses PostgreSQL).
const Store = Layer.unwrapScoped(Effect.gen(function*() {
  const dir = yield* (yield* FileSystem.FileSystem).makeTempDirectoryScoped({ prefix: "tether-threads-" })
  return SqlThreadStore.layer.pipe(Layer.provide(SqliteClient.layer({ filename: Path.join(dir, "threads.db") })))
}))

// runMain: SIGINT / SIGTERM interrupt the program, so every scope closes (the agent's ordered
// close: processes stopped, clone removed, token revoked) before the process exits.
NodeRuntime.runMain(program.pipe(Effect.provide(Store), Effect.provide(Harness.layer)))
