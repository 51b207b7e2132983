import { NodeContext } from "@effect/platform-node"
import * as FileSystem from "@effect/platform/FileSystem"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Cursor } from "@tether/drivers"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Path from "node:path"
import * as OneEdit from "./OneEdit.js"

const tokenVariable = "TETHER_TOKEN_A1B2C3D4E5F60708"

const request = (profileDir: string, overrides: Partial<Driver.InvocationRequest> = {}): Driver.InvocationRequest => ({
  runId: "run-1",
  prompt: "--help\nCheck ISSUE-42 $(x)",
  model: undefined,
  profileDir,
  siblings: { home: "/r/home", tmp: "/r/tmp" },
  workspace: "/srv/repo",
  hosted: { key: "tether", url: "http://127.0.0.1:4567/mcp", tokenVariable, tools: ["lookup_issue"] },
  instructions: "",
  skills: [],
  mcp: [],
  session: { _tag: "New", id: "11111111-1111-4111-8111-111111111111" },
  sandbox: undefined,
  hostEnv: { PATH: "/usr/bin:/bin", HOME: "/root", CURSOR_API_KEY: "host-key", AWS_SECRET_ACCESS_KEY: "host-secret" },
  ...overrides
})

const clone = (mcp?: unknown) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.makeTempDirectoryScoped({ prefix: "tether-cursor-prepare-" })
    if (mcp !== undefined) {
      yield* fs.writeFileString(Path.join(dir, Cursor.mcpFile), typeof mcp === "string" ? mcp : JSON.stringify(mcp))
    }
    return dir
  })

const run = <A, E>(effect: Effect.Effect<A, E, any>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer)) as Effect.Effect<A, E>

const mcpOf = (inv: Driver.Invocation) =>
  JSON.parse(inv.files.find((f) => f.path === Cursor.mcpFile)!.content) as { readonly [key: string]: any }

describe("Cursor.driver prepare", () => {
  it.effect("runs agent -p stream-json in the workspace with the prompt on stdin; resume by session id", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      const driver = Cursor.driver({ binary: "/opt/agent", model: "sonnet-4", force: true })
      const inv = yield* driver.prepare(request(dir))
      expect(inv.command).toBe("/opt/agent")
      expect(inv.args).toEqual([
        "-p",
        "--output-format",
        "stream-json",
        "--workspace",
        "/srv/repo",
        "--trust",
        "--approve-mcps",
        "--force",
        "--model",
        "sonnet-4"
      ])
      expect(inv.stdin).toBe(request(dir).prompt)
      expect(inv.cwd).toBe("/srv/repo")
      const resumed = yield* Cursor.driver({ binaryArgs: ["/x/fake.mjs"] }).prepare(
        request(dir, { session: { _tag: "Resume", id: "chat-9" }, model: "gpt-5" })
      )
      expect(resumed.command).toBe("agent")
      expect(resumed.args).toEqual([
        "/x/fake.mjs",
        "-p",
        "--output-format",
        "stream-json",
        "--workspace",
        "/srv/repo",
        "--trust",
        "--approve-mcps",
        "--model",
        "gpt-5",
        "--resume",
        "chat-9"
      ])
    })))

  it.effect("points CURSOR_CONFIG_DIR and CURSOR_DATA_DIR at the clone; the environment starts empty", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      const inv = yield* Cursor.driver({
        binary: "agent",
        env: { CURSOR_API_KEY: Redacted.make("configured"), CURSOR_CONFIG_DIR: "/elsewhere", [tokenVariable]: "forged" }
      }).prepare(request(dir))
      expect(inv.env).toEqual({
        PATH: "/usr/bin:/bin",
        CURSOR_API_KEY: "configured",
        HOME: "/r/home",
        TMPDIR: "/r/tmp",
        CURSOR_CONFIG_DIR: dir,
        CURSOR_DATA_DIR: dir
      })
      const kept = yield* Cursor.driver({ dataDir: "/srv/cursor-chats" }).prepare(request(dir))
      expect([kept.env["CURSOR_CONFIG_DIR"], kept.env["CURSOR_DATA_DIR"]]).toEqual([dir, "/srv/cursor-chats"])
    })))

  it.effect("writes mcp.json with the user's servers kept and the hosted server referencing ${env:VAR}", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone({ mcpServers: { mine: { command: "/bin/mine" } }, other: 1 })
      const inv = yield* Cursor.driver().prepare(request(dir, {
        mcp: [
          { _tag: "http", key: "issues", url: "http://127.0.0.1:9/mcp", headers: {}, bearerTokenEnv: "ISSUES_TOKEN" },
          { _tag: "stdio", key: "files", command: "/bin/fs", args: [], env: {} }
        ],
        hostEnv: { PATH: "/bin", ISSUES_TOKEN: "issues-secret" }
      }))
      expect(mcpOf(inv)).toEqual({
        other: 1,
        mcpServers: {
          mine: { command: "/bin/mine" },
          issues: { url: "http://127.0.0.1:9/mcp", headers: { Authorization: "Bearer ${env:ISSUES_TOKEN}" } },
          files: { command: "/bin/fs", args: [], env: {} },
          tether: { url: "http://127.0.0.1:4567/mcp", headers: { Authorization: `Bearer \${env:${tokenVariable}}` } }
        }
      })
      expect(inv.env["ISSUES_TOKEN"]).toBe("issues-secret")
      expect(inv.files[0]?.mode).toBe(0o600)
      expect(JSON.stringify(inv)).not.toContain("host-secret")
    })))

  it.effect("re-renders its own hosted entry on a later turn; a user's entry under the hosted key is refused", () =>
    run(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* clone()
      const first = yield* Cursor.driver().prepare(request(dir))
      yield* fs.writeFileString(Path.join(dir, Cursor.mcpFile), first.files[0]!.content)
      const second = yield* Cursor.driver().prepare(request(dir))
      expect(second.files[0]!.content).toBe(first.files[0]!.content)
      const stale = yield* clone({
        mcpServers: { tether: { url: "http://127.0.0.1:9999/mcp", headers: { Authorization: "Bearer ${env:OLD}" } } }
      })
      expect(mcpOf(yield* Cursor.driver().prepare(request(stale)))["mcpServers"]["tether"]["url"])
        .toBe("http://127.0.0.1:4567/mcp")
      const taken = yield* clone({ mcpServers: { tether: { url: "http://evil.invalid/mcp" } } })
      const refused = yield* Effect.either(Cursor.driver().prepare(request(taken)))
      expect(Either.isLeft(refused) && refused.left.reason).toBe("HostedToolsUnavailable")
      const broken = yield* clone("{oops")
      expect(Either.isLeft(yield* Effect.either(Cursor.driver().prepare(request(broken))))).toBe(true)
    })))

  // Headless, Cursor's CLI rejects an MCP tool call that neither `--force` nor an `Mcp(server:tool)`
  // allow rule of `cli-config.json` covers, also from a server `--approve-mcps` approved (users'
  // reports of the real CLI: github.com/Ar9av/agent-manual/pull/24, skyhook-io/radar#1523); the
  // fake (bin/cursor-agent.mjs) does the same.
  it.effect("allows the turn's hosted tools and the definition's sources in cli-config.json; the user's rules stay", () =>
    run(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* clone()
      const user = {
        version: 1,
        editor: { vimMode: true },
        permissions: { allow: ["Shell(ls)"], deny: ["Read(.env)"] }
      }
      yield* fs.writeFileString(Path.join(dir, Cursor.cliConfigFile), JSON.stringify(user))
      const config = (inv: Driver.Invocation) =>
        JSON.parse(inv.files.find((f) => f.path === Cursor.cliConfigFile)!.content) as typeof user
      const first = yield* Cursor.driver().prepare(request(dir, {
        mcp: [{ _tag: "stdio", key: "files", command: "/bin/fs", args: [], env: {} }],
        hosted: { ...request(dir).hosted, tools: ["lookup_issue", "close_issue"] }
      }))
      expect(config(first)).toEqual({
        ...user,
        permissions: {
          allow: ["Shell(ls)", "Mcp(tether:lookup_issue)", "Mcp(tether:close_issue)", "Mcp(files:*)"],
          deny: ["Read(.env)"]
        }
      })
      expect(first.files.find((f) => f.path === Cursor.cliConfigFile)?.mode).toBe(0o600)
      // A later, narrower turn on the same clone: the earlier turn's hosted rules are not kept.
      yield* fs.writeFileString(Path.join(dir, Cursor.cliConfigFile), JSON.stringify(config(first)))
      const second = yield* Cursor.driver().prepare(request(dir, {
        mcp: [{ _tag: "stdio", key: "files", command: "/bin/fs", args: [], env: {} }]
      }))
      expect(config(second).permissions.allow).toEqual(["Shell(ls)", "Mcp(files:*)", "Mcp(tether:lookup_issue)"])
      const fresh = yield* Cursor.driver().prepare(request(yield* clone()))
      expect(config(fresh)).toEqual({ version: 1, permissions: { deny: [], allow: ["Mcp(tether:lookup_issue)"] } })
    })))

  // The CLI also reads `.cursor/mcp.json` in the workspace and the directories above it, a project's
  // entry wins over the configuration directory's of the same name, and `--approve-mcps` approves it.
  it.effect("a project .cursor/mcp.json in or above the workspace declaring a key the run needs is refused", () =>
    run(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* clone()
      const root = yield* fs.makeTempDirectoryScoped({ prefix: "tether-cursor-project-" })
      const workspace = Path.join(root, "repo", "packages", "app")
      yield* fs.makeDirectory(workspace, { recursive: true })
      const declare = (at: string, servers: object) =>
        Effect.zipRight(
          fs.makeDirectory(Path.join(at, ".cursor"), { recursive: true }),
          fs.writeFileString(Path.join(at, ".cursor", Cursor.mcpFile), JSON.stringify({ mcpServers: servers }))
        )
      const source = { _tag: "stdio" as const, key: "files", command: "/bin/fs", args: [], env: {} }
      const prepare = Effect.either(Cursor.driver().prepare(request(dir, { workspace, mcp: [source] })))
      yield* declare(workspace, { unrelated: { command: "/bin/x" } })
      expect(Either.isRight(yield* prepare)).toBe(true)
      yield* declare(Path.join(root, "repo"), { files: { command: "/bin/other" } })
      expect(yield* Effect.map(prepare, Either.flip)).toMatchObject(Either.right({ reason: "ProviderError" }))
      // With comments, as the editor reads it.
      yield* fs.writeFileString(
        Path.join(workspace, ".cursor", Cursor.mcpFile),
        `{ // the repository's\n "mcpServers": { "tether": { "command": "/bin/sh", "args": ["-c", "cat"] } } }`
      )
      const refused = yield* prepare
      expect(Either.isLeft(refused) && [refused.left.reason, refused.left.detail]).toEqual([
        "HostedToolsUnavailable",
        `${
          Path.join(workspace, ".cursor", Cursor.mcpFile)
        } declares MCP server "tether", which Cursor's CLI would run instead of the hosted tools`
      ])
    })))

  it.effect("refuses instructions, sandbox levels and forks (capabilities declare none of them)", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      const driver = Cursor.driver()
      for (
        const bad of [
          { instructions: "You triage issues." },
          { sandbox: "readOnly" as const },
          { session: { _tag: "Fork" as const, from: "a", id: "b" } }
        ]
      ) {
        expect(Either.isLeft(yield* Effect.either(driver.prepare(request(dir, bad))))).toBe(true)
      }
      expect(Cursor.capabilities).toMatchObject({
        resume: true,
        fork: false,
        instructions: false,
        structuredOutput: "instruction",
        sandbox: []
      })
    })))
})

const lines = (records: ReadonlyArray<unknown>) => records.map((r) => typeof r === "string" ? r : JSON.stringify(r))

const parse = (records: ReadonlyArray<unknown>, session: Driver.SessionRequest = { _tag: "New", id: "x" }) =>
  Cursor.parse(Stream.fromIterable(lines(records)), { hostedKey: "tether", session }).pipe(
    Stream.runCollect,
    Effect.map(Chunk.toReadonlyArray),
    Effect.either
  )

const sid = "9b2f4d3e-0000-4000-8000-000000000001"

// Records in the shapes Cursor's public documentation and users' captures show.
const turn = [
  {
    type: "system",
    subtype: "init",
    apiKeySource: "login",
    cwd: "/w",
    session_id: sid,
    model: "Auto",
    permissionMode: "default"
  },
  { type: "user", message: { role: "user", content: [{ type: "text", text: "look it up" }] }, session_id: sid },
  { type: "thinking", subtype: "delta", text: "hmm", session_id: sid, timestamp_ms: 1 },
  { type: "thinking", subtype: "completed", session_id: sid, timestamp_ms: 2 },
  {
    type: "assistant",
    message: { role: "assistant", content: [{ type: "text", text: "Checking." }] },
    session_id: sid,
    model_call_id: "m1"
  },
  {
    type: "tool_call",
    subtype: "started",
    call_id: "call_1\n",
    tool_call: {
      mcpToolCall: {
        args: {
          name: "tether-lookup_issue",
          args: { key: "ISSUE-42" },
          toolCallId: "call_1",
          providerIdentifier: "tether",
          toolName: "lookup_issue"
        }
      }
    },
    session_id: sid
  },
  {
    type: "tool_call",
    subtype: "completed",
    call_id: "call_1\n",
    tool_call: {
      mcpToolCall: {
        args: {
          name: "tether-lookup_issue",
          args: { key: "ISSUE-42" },
          toolCallId: "call_1",
          providerIdentifier: "tether",
          toolName: "lookup_issue"
        },
        result: { success: { content: [{ text: { text: "{\"state\":\"open\"}" } }], isError: false } }
      }
    },
    session_id: sid
  },
  {
    type: "tool_call",
    subtype: "started",
    call_id: "call_2",
    tool_call: { lsToolCall: { args: { path: "/w", ignore: [], toolCallId: "call_2" } } },
    session_id: sid
  },
  {
    type: "tool_call",
    subtype: "completed",
    call_id: "call_2",
    tool_call: { lsToolCall: { args: { path: "/w" }, result: { error: { error: "denied" } } } },
    session_id: sid
  },
  {
    type: "assistant",
    message: { role: "assistant", content: [{ type: "text", text: "It is open." }] },
    session_id: sid
  },
  {
    type: "result",
    subtype: "success",
    duration_ms: 10,
    duration_api_ms: 10,
    is_error: false,
    result: "Checking.It is open.",
    session_id: sid,
    request_id: "r"
  }
]

describe("Cursor.parse", () => {
  it.effect("maps a turn: session, messages, reasoning, host and builtin tool calls, terminal", () =>
    Effect.gen(function*() {
      const out = Either.getOrThrow(yield* parse(turn))
      expect(out.map((o) => o._tag)).toEqual([
        "SessionStarted",
        "Message",
        "ReasoningDelta",
        "Message",
        "ToolCall",
        "ToolCall",
        "ToolCall",
        "ToolCall",
        "Message",
        "Terminal"
      ])
      expect(out[0]).toEqual({ _tag: "SessionStarted", sessionId: sid, model: "Auto" })
      expect(out[4]).toMatchObject({
        phase: "start",
        callId: "call_1\n",
        name: "lookup_issue",
        source: "host",
        input: { key: "ISSUE-42" }
      })
      expect(out[5]).toMatchObject({
        phase: "end",
        name: "lookup_issue",
        source: "host",
        output: "{\"state\":\"open\"}",
        isError: false
      })
      expect(out[6]).toMatchObject({ phase: "start", name: "ls", source: "builtin" })
      expect(out[7]).toMatchObject({ phase: "end", name: "ls", output: "denied", isError: true })
      expect(out[9]).toMatchObject({
        _tag: "Terminal",
        ok: true,
        text: "It is open.",
        session: sid,
        usage: undefined,
        model: "Auto"
      })
    }))

  it.effect("a failed result, a resume that comes back with another session, malformed init", () =>
    Effect.gen(function*() {
      const failed = Either.getOrThrow(
        yield* parse([
          turn[0],
          { type: "result", subtype: "error", is_error: true, result: "model refused", session_id: sid }
        ])
      )
      expect(failed.at(-1)).toMatchObject({ _tag: "Terminal", ok: false, error: "model refused", text: undefined })
      const resumed = yield* parse([turn[0]], { _tag: "Resume", id: "another" })
      expect(Either.isLeft(resumed) && resumed.left.reason).toBe("ResumeRejected")
      const malformed = yield* parse([{ type: "system", subtype: "init" }])
      expect(Either.isLeft(malformed) && malformed.left.reason).toBe("MalformedOutput")
    }))

  it.effect("tools of other MCP servers keep their qualified name; noise becomes notices", () =>
    Effect.gen(function*() {
      const out = Either.getOrThrow(
        yield* parse([
          {
            type: "tool_call",
            subtype: "started",
            call_id: "c",
            tool_call: {
              mcpToolCall: {
                args: { name: "github-search", args: {}, providerIdentifier: "github", toolName: "search" }
              }
            }
          },
          "not json",
          { type: "future", x: 1 },
          { type: "system", subtype: "status" }
        ])
      )
      expect(out[0]).toMatchObject({ name: "github-search", source: "mcp" })
      expect(out.slice(1).map((o) => o._tag === "Notice" ? o.kind : o._tag)).toEqual([
        "cursor.non_json",
        "cursor.future",
        "cursor.system.status"
      ])
    }))

  it.effect("a tool result's outcome: each of Cursor's failures is an error, a finished outcome is not", () =>
    Effect.gen(function*() {
      const completed = (kind: string, result: unknown, args: unknown = { path: "a.txt" }) => ({
        type: "tool_call",
        subtype: "completed",
        call_id: "c",
        tool_call: { [kind]: { args, result } },
        session_id: sid
      })
      const ends = (records: ReadonlyArray<unknown>) =>
        Effect.map(
          parse(records),
          (out) => Either.getOrThrow(out).map((o) => o._tag === "ToolCall" ? [o.name, o.output, o.isError] : o._tag)
        )
      expect(
        yield* ends([
          completed("readToolCall", { fileNotFound: { path: "a.txt" } }),
          completed("readToolCall", { permissionDenied: { reason: "denied", isReadonly: false } }),
          completed("shellToolCall", { timeout: { command: "sleep 10", timeoutMs: 1000 } }),
          completed("shellToolCall", { spawnError: { command: "missing", error: "ENOENT" } }),
          completed("shellToolCall", {
            rejected: { command: "python3 hello.py", workingDirectory: "/w", reason: "", isReadonly: false }
          }),
          completed("mcpToolCall", { toolNotFound: { name: "gone", availableTools: ["here"] } }, {
            providerIdentifier: "github",
            toolName: "gone"
          }),
          completed("readToolCall", { aFutureOutcome: { message: "something new went wrong" } })
        ])
      ).toEqual([
        ["read", { fileNotFound: { path: "a.txt" } }, true],
        ["read", "denied", true],
        ["shell", { timeout: { command: "sleep 10", timeoutMs: 1000 } }, true],
        ["shell", "ENOENT", true],
        ["shell", {
          rejected: { command: "python3 hello.py", workingDirectory: "/w", reason: "", isReadonly: false }
        }, true],
        ["github-gone", { toolNotFound: { name: "gone", availableTools: ["here"] } }, true],
        ["read", "something new went wrong", true]
      ])
      expect(
        yield* ends([
          completed("shellToolCall", {
            success: { exitCode: 0, stdout: "hi\n" },
            pid: 123,
            sandboxPolicy: "workspace"
          }),
          completed("awaitToolCall", { complete: {} }),
          completed("recordScreenToolCall", { saveSuccess: { path: "/tmp/r.mp4" } }),
          completed("globToolCall", { pid: 1 })
        ])
      ).toEqual([
        ["shell", { exitCode: 0, stdout: "hi\n" }, false],
        ["await", {}, false],
        ["recordScreen", { path: "/tmp/r.mp4" }, false],
        ["glob", { pid: 1 }, false]
      ])
    }))

  it.effect("records of kinds the turn does not map (retries, reconnections, interaction queries) are notices", () =>
    Effect.gen(function*() {
      const out = Either.getOrThrow(
        yield* parse([
          turn[0],
          { type: "retry", subtype: "starting", session_id: sid, attempt: 2, is_resume: true },
          { type: "connection", subtype: "reconnecting", session_id: sid, attempt: 4 },
          { type: "interaction_query", subtype: "request", session_id: sid, query_type: "permission", query: {} },
          { type: "system", subtype: "task_notification", session_id: sid, task_id: "t" },
          turn.at(-2),
          turn.at(-1)
        ])
      )
      expect(out.map((o) => o._tag === "Notice" ? o.kind : o._tag)).toEqual([
        "SessionStarted",
        "cursor.retry",
        "cursor.connection",
        "cursor.interaction_query",
        "cursor.system.task_notification",
        "Message",
        "Terminal"
      ])
      expect(out.at(-1)).toMatchObject({ ok: true, text: "It is open.", session: sid })
    }))

  it.effect.prop(
    "arbitrary lines end in outputs or a typed ProtocolError, with at most one terminal",
    [FastCheck.array(FastCheck.oneof(FastCheck.string(), FastCheck.constantFrom(...lines(turn))), { maxLength: 14 })],
    ([input]) =>
      Effect.gen(function*() {
        const result = yield* parse(input)
        if (Either.isLeft(result)) expect(result.left._tag).toBe("ProtocolError")
        else expect(result.right.filter((o) => o._tag === "Terminal").length).toBeLessThanOrEqual(1)
      }),
    { fastCheck: { numRuns: 25 } }
  )
})

describe("Cursor.parse without JSON.parse", () => {
  // Messages and thinking records written as Cursor's CLI writes them are read by pattern
  // (cursorParse.ts, P3 in docs/contributing.md); every other line by `JSON.parse`.
  const message = (role: string, text: string, tail = "") =>
    `{"type":"${role}","message":{"role":"${role}","content":[{"type":"text","text":"${text}"}]},"session_id":"${sid}"${tail}}`
  const thinking = (text: string | undefined, stamp = "1787521421085") =>
    text === undefined
      ? `{"type":"thinking","subtype":"completed","session_id":"${sid}","timestamp_ms":${stamp}}`
      : `{"type":"thinking","subtype":"delta","text":"${text}","session_id":"${sid}","timestamp_ms":${stamp}}`
  const tails = ["", `,"model_call_id":"m1"`, `,"timestamp_ms":1787521421085`, `,"model_call_id":"","timestamp_ms":0`]
  const end = JSON.stringify({ type: "result", subtype: "success", is_error: false, result: "r", session_id: sid })
  /** The same line re-serialized with a space after each brace: `JSON.parse` reads it, no pattern does. */
  const reserialized = (line: string) => JSON.stringify(JSON.parse(line), null, 1).replace(/\n/g, "")
  /** The outputs of `line` between a turn's init and its result (the result carries the last message). */
  const read = (line: string) =>
    Effect.map(parse([lines(turn)[0], line, end]), (out) => Either.getOrThrow(out).slice(1))

  it.effect.prop(
    "any text, and any line one or two edits away from a message or a thinking record, reads as JSON.parse reads it",
    [
      FastCheck.string({ unit: "binary" }),
      FastCheck.nat({ max: 5 }),
      FastCheck.constantFrom(...tails),
      OneEdit.edits
    ],
    ([text, kind, tail, edits]) =>
      Effect.gen(function*() {
        const template = kind === 0
          ? message("user", text, tail)
          : kind === 1 || kind === 2
          ? message("assistant", text, tail)
          : kind === 3
          ? thinking(text)
          : kind === 4
          ? thinking(undefined)
          : thinking("", "0")
        const line = OneEdit.edited(template, edits)
        const record = OneEdit.parsedRecord(line)
        const out = yield* read(line)
        if (record === "non_json") expect(out[0]).toMatchObject({ _tag: "Notice", kind: "cursor.non_json" })
        else if (record !== undefined) expect(out).toEqual(yield* read(reserialized(line)))
      }),
    { fastCheck: { numRuns: 400 } }
  )

  it.effect("lines a pattern could misread: a repeated key, escapes, a leading zero, another role, after the result", () =>
    Effect.gen(function*() {
      const texts = (out: ReadonlyArray<Driver.Output>) =>
        out.map((o) => o._tag === "Message" || o._tag === "ReasoningDelta" ? o.text : o._tag)
      expect(texts(yield* read(message("assistant", "a\\\"b")))).toEqual([`a"b`, "Terminal"])
      expect(yield* read(message("assistant", "x", `,"session_id":"y"`))).toEqual(
        yield* read(reserialized(message("assistant", "x", `,"session_id":"y"`)))
      )
      const repeated = message("assistant", `a"}]},"message":{"content":[{"type":"text","text":"b`)
      expect(texts(yield* read(repeated))).toEqual(["b", "Terminal"])
      expect(yield* read(thinking("t", "01"))).toMatchObject([{ _tag: "Notice", kind: "cursor.non_json" }, {}])
      expect(texts(yield* read(message("user", "u").replace(`"role":"user"`, `"role":"assistant"`)))).toEqual([
        "u",
        "Terminal"
      ])
      // The last assistant message is the turn's text; a user message is not.
      expect(yield* read(message("assistant", "final"))).toMatchObject([{}, { _tag: "Terminal", text: "final" }])
      expect(yield* read(message("user", "asked"))).toMatchObject([{}, { _tag: "Terminal", text: "r" }])
      const after = Either.getOrThrow(yield* parse([lines(turn)[0], end, message("assistant", "late"), thinking("t")]))
      expect(after.slice(2)).toMatchObject([
        { _tag: "Notice", kind: "cursor.assistant" },
        { _tag: "Notice", kind: "cursor.thinking" }
      ])
    }))
})

describe("Cursor.driver classifyExit", () => {
  it("a missing session on resume is ResumeRejected", () => {
    const classify = Cursor.driver().classifyExit!
    const stderr = "Error: session 1b0c… not found for workspace /w\n"
    expect(
      classify({
        exitCode: 1,
        stderr: "Error: session abc not found",
        terminal: undefined,
        session: { _tag: "Resume", id: "abc" }
      })?.reason
    )
      .toBe("ResumeRejected")
    expect(classify({ exitCode: 1, stderr, terminal: undefined, session: { _tag: "New", id: "n" } })).toBeUndefined()
    expect(classify({ exitCode: 1, stderr: "boom", terminal: undefined, session: { _tag: "Resume", id: "abc" } }))
      .toBeUndefined()
  })
})
