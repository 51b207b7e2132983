/**
 * Session persistence across execution clones with the real CLIs, offline: turn 1 runs in clone
 * A, which is closed (removed); turn 2 resumes the same session in a fresh clone B of the same
 * identity, seeded only with the entries the driver's layout declares as `sessions`, against a
 * new MCP endpoint (new port, new token). The source profile is never written.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import type * as Event from "@tether/core/Event"
import { Claude, Codex, Cursor, Gemini } from "@tether/drivers"
import * as Profile from "@tether/profile/Profile"
import * as ProfileLayout from "@tether/profile/ProfileLayout"
import { AnthropicServer, CursorAgent, Harness, ResponsesServer } from "@tether/testing"
import * as GeminiServer from "@tether/testing/GeminiServer"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as NodeCrypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { baseRequest, claudeBinary, mcpServer, type Root, runTurn } from "./ClaudeHarness.js"
import * as ClaudeLive from "./ClaudeLiveHarness.js"
import { offlineCodex } from "./CodexHarness.js"

const terminal = (outputs: ReadonlyArray<Driver.Output>) =>
  outputs.find((o): o is Driver.Terminal => o._tag === "Terminal")

/** Every file under `dir` (relative paths, sorted), without following links. */
const files = (dir: string): Array<string> =>
  (Fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as Array<Fs.Dirent>)
    .filter((d) => !d.isDirectory())
    .map((d) => Path.relative(dir, Path.join(d.parentPath, d.name)))
    .sort()

/** Content, mode and type of every entry of a tree: equal digests mean byte-identical trees. */
const treeDigest = (dir: string): string => {
  const hash = NodeCrypto.createHash("sha256")
  for (const rel of files(dir)) {
    const info = Fs.lstatSync(Path.join(dir, rel))
    hash.update(`${rel}\0${info.mode}\0`)
    hash.update(info.isSymbolicLink() ? Fs.readlinkSync(Path.join(dir, rel)) : Fs.readFileSync(Path.join(dir, rel)))
  }
  return hash.digest("hex")
}

/** A source profile, a clone root, a session-store directory and a workspace, removed with the scope. */
const sandbox = Effect.acquireRelease(
  Effect.sync(() => {
    const base = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-sessions-test-"))
    const dirs = {
      base,
      source: Path.join(base, "source"),
      root: Path.join(base, "clones"),
      store: Path.join(base, "sessions"),
      work: Path.join(base, "work")
    }
    for (const dir of [dirs.source, dirs.work]) Fs.mkdirSync(dir)
    return dirs
  }),
  ({ base }) => Effect.sync(() => Fs.rmSync(base, { recursive: true, force: true }))
)
type Sandbox = Effect.Effect.Success<typeof sandbox>

/** An execution clone of the sandbox's source for `layout`, in its own scope. */
const openClone = (box: Sandbox, layout: Driver.Driver["layout"], options: Profile.CloneOptions = {}) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const clone = yield* Profile.clone(
      Profile.cloneFrom(box.source, box.root, { sessions: box.store, ...options }),
      layout,
      { agentId: NodeCrypto.randomUUID(), identity: `${layout.provider}:tenant-42/issue-123` }
    ).pipe(Scope.extend(scope))
    const root: Root = {
      root: clone.root,
      profile: clone.dir,
      home: clone.siblings["home"]!,
      tmp: clone.siblings["tmp"]!,
      work: box.work
    }
    return { clone, root, close: Scope.close(scope, Exit.void) }
  })

const newToken = () => `token-${NodeCrypto.randomUUID()}`

const codexDriver = (server: ResponsesServer.ResponsesServer) => offlineCodex(server.baseUrl)

/**
 * Live Claude Code agents made on demand (`make`), on one sandbox, one scripted model and one
 * session store: each agent is a host of its own clone.
 */
const claudeLiveHosts = Effect.gen(function*() {
  const box = yield* Harness.sandbox
  const server = yield* AnthropicServer.make({ respond: ClaudeLive.respond })
  const store = Path.join(box.base, "sessions")
  const make = Agent.make({
    driver: ClaudeLive.driverFor(server),
    definition: { instructions: "", skills: [], tools: Toolkit.empty },
    workspace: box.workspace,
    profile: Profile.cloneFrom(box.source, box.root, { sessions: store })
  })
  return { box, make, server, store }
})

describe("session entries outlive execution clones (real CLIs)", () => {
  it.live(
    "Codex: `exec resume` in a fresh clone after the first clone was closed, on a new endpoint",
    () =>
      Effect.gen(function*() {
        const box = yield* sandbox
        Fs.mkdirSync(Path.join(box.source, "prompts"))
        Fs.writeFileSync(Path.join(box.source, "prompts/brief.md"), "Answer briefly.\n", { mode: 0o644 })
        const sourceBefore = treeDigest(box.source)
        const server = yield* ResponsesServer.make({ script: (r) => ResponsesServer.text(`answer ${r.index}`) })
        const driver = codexDriver(server)

        const a = yield* openClone(box, driver.layout)
        const tokenA = newToken()
        const mcpA = yield* mcpServer(tokenA)
        const first = yield* runTurn(driver, baseRequest(a.root, mcpA.url, { prompt: "first question" }), tokenA)
        expect(first.exitCode).toBe(0)
        const thread = terminal(first.outputs)!.session!
        expect(thread).toMatch(/^[0-9a-f-]{36}$/)
        yield* a.close
        expect(Fs.existsSync(a.clone.root)).toBe(false)
        // Only the rollout is kept: no sqlite state, no config, no auth.
        const stored = files(Path.join(a.clone.sessions!, "profile"))
        expect(stored).toHaveLength(1)
        expect(stored[0]).toMatch(new RegExp(`^sessions/\\d{4}/\\d{2}/\\d{2}/rollout-.*-${thread}\\.jsonl$`))

        // Control: a fresh clone without the store cannot resume (the CLI rejects the thread id).
        const bare = yield* openClone(box, driver.layout, { sessions: false })
        const tokenC = newToken()
        const mcpC = yield* mcpServer(tokenC)
        const session: Driver.SessionRequest = { _tag: "Resume", id: thread }
        const rejected = yield* runTurn(driver, baseRequest(bare.root, mcpC.url, { prompt: "x", session }), tokenC)
        expect(rejected.exitCode).toBe(1)
        expect(Codex.classifyExit({ exitCode: 1, stderr: rejected.stderr, terminal: undefined, session })?.reason)
          .toBe("ResumeRejected")
        yield* bare.close

        const b = yield* openClone(box, driver.layout)
        expect(b.clone.root).not.toBe(a.clone.root)
        expect(files(b.clone.dir).filter((f) => f.startsWith("sessions/"))).toEqual(stored)
        const tokenB = newToken()
        const mcpB = yield* mcpServer(tokenB)
        expect(mcpB.url).not.toBe(mcpA.url)
        const second = yield* runTurn(
          driver,
          baseRequest(b.root, mcpB.url, { prompt: "second question", session }),
          tokenB
        )
        expect(second.exitCode).toBe(0)
        expect(terminal(second.outputs)).toMatchObject({ ok: true, text: "answer 1", session: thread })
        const requests = yield* server.requests
        expect(requests).toHaveLength(2)
        const prompts = ResponsesServer.userTexts(requests[1]!).filter((t) => !t.startsWith("<environment_context>"))
        expect(prompts).toEqual(["first question", "second question"])
        expect(ResponsesServer.assistantTexts(requests[1]!)).toEqual(["answer 0"])
        expect(mcpB.log.every((entry) => entry.authorization === `Bearer ${tokenB}`)).toBe(true)
        yield* b.close
        // The resumed turn was appended to the stored rollout.
        const rollout = Fs.readFileSync(Path.join(b.clone.sessions!, "profile", stored[0]!), "utf8")
        expect(rollout).toContain("second question")
        expect(treeDigest(box.source)).toBe(sourceBefore)
        expect(Fs.readdirSync(box.root)).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    120_000
  )

  it.live("Claude: `--resume` in a fresh clone after the first clone was closed", () =>
    Effect.gen(function*() {
      const box = yield* sandbox
      Fs.writeFileSync(Path.join(box.source, "settings.json"), "{}\n", { mode: 0o600 })
      const sourceBefore = treeDigest(box.source)
      const server = yield* AnthropicServer.make({
        script: [AnthropicServer.reply("first answer"), AnthropicServer.reply("second answer")]
      })
      const driver = Claude.driver({
        binary: claudeBinary,
        env: {
          ANTHROPIC_BASE_URL: server.url,
          ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
          CLAUDE_CODE_MAX_RETRIES: "0"
        }
      })
      const a = yield* openClone(box, driver.layout)
      const tokenA = newToken()
      const mcpA = yield* mcpServer(tokenA)
      const first = yield* runTurn(driver, baseRequest(a.root, mcpA.url, { prompt: "first question" }), tokenA)
      expect(first.exitCode).toBe(0)
      const session = terminal(first.outputs)!.session!
      yield* a.close
      expect(Fs.existsSync(a.clone.root)).toBe(false)
      const stored = files(Path.join(a.clone.sessions!, "profile"))
      expect(stored.some((f) => f.startsWith("projects/") && f.endsWith(`/${session}.jsonl`))).toBe(true)
      expect(stored.every((f) => f.startsWith("projects/"))).toBe(true)

      const b = yield* openClone(box, driver.layout)
      const tokenB = newToken()
      const mcpB = yield* mcpServer(tokenB)
      const second = yield* runTurn(
        driver,
        baseRequest(b.root, mcpB.url, { prompt: "second question", session: { _tag: "Resume", id: session } }),
        tokenB
      )
      expect(second.failure).toBeUndefined()
      expect(terminal(second.outputs)).toMatchObject({ ok: true, text: "second answer", session })
      const messages = yield* server.messages
      const transcript = AnthropicServer.transcript(messages[1]!)
      expect(transcript.map(([role]) => role)).toEqual(["user", "assistant", "user"])
      expect(transcript[0]![1]).toContain("first question")
      expect(transcript[1]![1]).toBe("first answer")
      yield* b.close
      expect(treeDigest(box.source)).toBe(sourceBefore)
      expect(Fs.readdirSync(box.root)).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)

  it.live("Gemini: `--resume` in a fresh clone after the first clone was closed", () =>
    Effect.gen(function*() {
      const box = yield* sandbox
      Fs.mkdirSync(Path.join(box.source, ".gemini"))
      Fs.writeFileSync(Path.join(box.source, ".gemini/settings.json"), "{}\n", { mode: 0o600 })
      const sourceBefore = treeDigest(box.source)
      const model = yield* GeminiServer.make({
        respond: (request) => GeminiServer.reply(`turn ${GeminiServer.transcript(request).length}`)
      })
      const driver = Gemini.driver({
        model: "gemini-2.5-flash",
        env: { GOOGLE_GEMINI_BASE_URL: model.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
      })
      const id = crypto.randomUUID()
      const a = yield* openClone(box, driver.layout)
      const tokenA = newToken()
      const mcpA = yield* mcpServer(tokenA)
      const first = yield* runTurn(
        driver,
        baseRequest(a.root, mcpA.url, { prompt: "first question", session: { _tag: "New", id } }),
        tokenA
      )
      expect(first.exitCode).toBe(0)
      yield* a.close
      const stored = files(Path.join(a.clone.sessions!, "profile"))
      expect(stored).toContain(".gemini/projects.json")
      expect(stored.some((f) => /^\.gemini\/tmp\/[^/]+\/chats\/session-.*\.jsonl$/.test(f))).toBe(true)

      const b = yield* openClone(box, driver.layout)
      const tokenB = newToken()
      const mcpB = yield* mcpServer(tokenB)
      const second = yield* runTurn(
        driver,
        baseRequest(b.root, mcpB.url, { prompt: "second question", session: { _tag: "Resume", id } }),
        tokenB
      )
      expect(second.exitCode).toBe(0)
      expect(terminal(second.outputs)).toMatchObject({ ok: true, session: id })
      const transcript = GeminiServer.transcript((yield* model.generations).at(-1)!)
      expect(transcript.map(([role]) => role)).toEqual(["user", "model", "user"])
      expect(transcript[0]![1]).toContain("first question")
      expect(transcript[2]![1]).toBe("second question")
      yield* b.close
      expect(treeDigest(box.source)).toBe(sourceBefore)
      expect(Fs.readdirSync(box.root)).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)

  it.live(
    "Codex through the public API: a rebuilt agent resumes the thread by the host's key (resumeOnly)",
    () =>
      Effect.gen(function*() {
        const LookupIssue = Tool.make("lookup_issue", {
          description: "Look up one issue by key.",
          input: { key: Schema.String },
          output: Schema.Struct({ title: Schema.String }),
          revision: "lookup_issue/v1"
        })
        const IssueTools = Toolkit.make(LookupIssue)
        const box = yield* Harness.sandbox
        const sourceBefore = yield* Harness.treeDigest(box.source)
        const server = yield* ResponsesServer.make({ script: (r) => ResponsesServer.text(`answer ${r.index}`) })
        const store = Path.join(box.base, "sessions")
        const make = Agent.make({
          driver: codexDriver(server),
          definition: { instructions: "You triage issues.", skills: [], tools: IssueTools },
          workspace: box.workspace,
          profile: Profile.cloneFrom(box.source, box.root, { sessions: store }),
          identity: { id: "issue-bot", tenant: "tenant-42" }
        })
        const [first, third] = yield* Effect.gen(function*() {
          const first = yield* Effect.scoped(Effect.gen(function*() {
            const agent = yield* make
            const thread = yield* agent.thread("tenant-42/issue-123")
            const first = yield* thread.run("first question")
            yield* thread.run("second question")
            return first
          }))
          expect(yield* Harness.entries(box.root)).toEqual([])
          const third = yield* Effect.scoped(Effect.gen(function*() {
            const agent = yield* make
            return yield* (yield* agent.thread("tenant-42/issue-123", { resumeOnly: true })).run("third question")
          }))
          return [first, third] as const
        }).pipe(
          Effect.provide(Layer.mergeAll(
            IssueTools.toLayer({ lookup_issue: ({ key }) => Effect.succeed({ title: `Title of ${key}` }) }),
            Harness.layer,
            ThreadStore.layerMemory
          ))
        )
        expect(third.session).toBe(first.session)
        expect(third.text).toBe("answer 2")
        const requests = yield* server.requests
        const prompts = ResponsesServer.userTexts(requests.at(-1)!).filter((t) =>
          !t.startsWith("<environment_context>")
        )
        expect(prompts).toEqual(["first question", "second question", "third question"])
        expect(yield* Harness.entries(box.root)).toEqual([])
        expect(yield* Harness.treeDigest(box.source)).toBe(sourceBefore)
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    120_000
  )

  it.live(
    "Claude live threads: two long-lived agents on one store take turns on a thread, each resuming the other's commit",
    () =>
      Effect.gen(function*() {
        const { box, make, server, store } = yield* claudeLiveHosts
        // A live turn's session is saved again once Claude Code has finished writing it (it
        // writes its transcript after its result): the other host's turn comes after that.
        const stored = (session: string, text: string) =>
          Effect.gen(function*() {
            for (let i = 0; i < 200; i++) {
              const files = (Fs.readdirSync(store, { recursive: true }) as Array<string>)
                .filter((f) => f.endsWith(`${session}.jsonl`))
              if (files.some((f) => Fs.readFileSync(Path.join(store, f), "utf8").includes(text))) return
              yield* Effect.sleep("50 millis")
            }
            throw new Error(`the store never held ${text}`)
          })
        yield* Effect.gen(function*() {
          // Both hosts up before the first turn: the second's clone holds nothing of the thread.
          const hostX = yield* make
          const hostY = yield* make
          const x = yield* hostX.thread("k")
          const y = yield* hostY.thread("k")
          const first = yield* x.run("first question")
          yield* stored(first.session!, "answer to first question")
          const second = yield* y.run("second question")
          expect(second.thread).toMatchObject({ mode: "resumed", fromTurns: 1 })
          yield* stored(first.session!, "answer to second question")
          // X's warm process holds turn 1 only: a fresh one resumes the committed turn 2.
          const third = yield* x.run("third question")
          expect(third.thread).toMatchObject({ mode: "resumed", fromTurns: 2 })
          expect([second.session, third.session]).toEqual([first.session, first.session])
          expect(third.text).toBe("answer to third question")
          // The model was given the whole conversation, both hosts' turns.
          const last = JSON.stringify((yield* server.messages).at(-1)!.messages)
          for (const text of ["first question", "answer to first question", "second question"]) {
            expect(last).toContain(text)
          }
        }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(Harness.layer, ThreadStore.layerMemory)))
        expect(yield* Harness.entries(box.root)).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    120_000
  )

  it.live(
    "Claude live threads: a session the store lost is restarted fresh (refused at the attach), not a failed turn",
    () =>
      Effect.gen(function*() {
        const { box, make, store } = yield* claudeLiveHosts
        yield* Effect.gen(function*() {
          const first = yield* Effect.scoped(
            Effect.flatMap(make, (agent) => Effect.flatMap(agent.thread("k"), (thread) => thread.run("first question")))
          )
          // The session store lost it: the next agent's clone has nothing to resume.
          Fs.rmSync(store, { recursive: true, force: true })
          const thread = yield* (yield* make).thread("k")
          const events = Array.from(yield* Stream.runCollect(thread.stream("second question")))
          const opened = events.find((e): e is Event.ThreadOpened => e._tag === "ThreadOpened")
          expect(opened?.opening).toMatchObject({
            mode: "restarted",
            from: first.session,
            reason: { _tag: "ResumeRejected" }
          })
          expect(events.at(-1)).toMatchObject({ _tag: "RunFinished", outcome: "success" })
          expect(events.filter((e) => e._tag === "RunStarted")).toHaveLength(1)
          const record = Option.getOrThrow(yield* thread.snapshot)
          expect(record.session).not.toBe(first.session)
          expect((yield* thread.history).map((entry) => entry.record.session)).toEqual([first.session])
        }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(Harness.layer, ThreadStore.layerMemory)))
        expect(yield* Harness.entries(box.root)).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    120_000
  )

  it.live(
    "Cursor through the public API: a rebuilt agent resumes by the host's key from the stored chat",
    () =>
      Effect.gen(function*() {
        const LookupIssue = Tool.make("lookup_issue", {
          description: "Look up one issue by key.",
          input: { key: Schema.String },
          output: Schema.Struct({ title: Schema.String }),
          revision: "lookup_issue/v1"
        })
        const IssueTools = Toolkit.make(LookupIssue)
        const box = yield* Harness.sandbox
        const sourceBefore = yield* Harness.treeDigest(box.source)
        const store = Path.join(box.base, "sessions")
        const make = Agent.make({
          driver: Cursor.driver(CursorAgent.config()),
          definition: { instructions: "", skills: [], tools: IssueTools },
          workspace: box.workspace,
          profile: Profile.cloneFrom(box.source, box.root, { sessions: store })
        })
        const texts = yield* Effect.gen(function*() {
          const [first, second] = yield* Effect.scoped(Effect.gen(function*() {
            const thread = yield* (yield* make).thread("tenant-42/issue-123")
            return [yield* thread.run("one"), yield* thread.run("two")] as const
          }))
          const third = yield* Effect.scoped(Effect.gen(function*() {
            const thread = yield* (yield* make).thread("tenant-42/issue-123", { resumeOnly: true })
            return yield* thread.run("three")
          }))
          expect(third.session).toBe(first.session)
          return [first.text, second.text, third.text]
        }).pipe(
          Effect.provide(Layer.mergeAll(
            IssueTools.toLayer({ lookup_issue: ({ key }) => Effect.succeed({ title: `Title of ${key}` }) }),
            Harness.layer,
            ThreadStore.layerMemory
          ))
        )
        // The fake agent numbers turns from its stored session: turn 3 proves the chat was resumed.
        expect(texts).toEqual(["turn 1", "turn 2", "turn 3"])
        expect(yield* Harness.entries(box.root)).toEqual([])
        expect(yield* Harness.treeDigest(box.source)).toBe(sourceBefore)
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    120_000
  )

  it("each driver's layout declares exactly the session entries its CLI resumes from", () => {
    const cases: ReadonlyArray<[ProfileLayout.ProfileLayout, ReadonlyArray<string>, ReadonlyArray<string>]> = [
      [
        Claude.driver().layout,
        ["projects/-srv-repo/8af53c1d-b1d1-4b20-97ee-59b0931a6a3f.jsonl"],
        [".claude.json", "settings.json", ".credentials.json", "backups/.claude.json.backup.1", ".tether-mcp.json"]
      ],
      [
        Codex.driver().layout,
        ["sessions/2026/11/30/rollout-2026-11-30T13-58-52-01a22cc0-557f-7382-addf-42e28945d00f.jsonl"],
        [
          "state_5.sqlite",
          "state_5.sqlite-wal",
          "thread_history_1.sqlite",
          "config.toml",
          "auth.json",
          "installation_id"
        ]
      ],
      [
        Gemini.driver().layout,
        [".gemini/projects.json", ".gemini/tmp/repo/.project_root", ".gemini/tmp/repo/chats/session-2026-11-30.jsonl"],
        [".gemini/settings.json", ".gemini/oauth_creds.json", ".gemini/history/repo/.project_root"]
      ],
      [
        Cursor.driver(CursorAgent.config()).layout,
        ["chats/0cc175b9c0f1b6a831c399e269772661/6f1c2a.json"],
        [Cursor.mcpFile, "cli-config.json", "auth.json"]
      ]
    ]
    for (const [layout, sessions, others] of cases) {
      for (const path of sessions) {
        expect([layout.provider, path, ProfileLayout.isSession(layout, path)]).toEqual([layout.provider, path, true])
      }
      for (const path of others) {
        expect([layout.provider, path, ProfileLayout.isSession(layout, path)]).toEqual([layout.provider, path, false])
      }
    }
  })
})
