/**
 * What `Approval.allowForSession` lets Claude Code's CLI do afterwards on a live thread
 * (real pinned CLI, offline; the scripted Anthropic server calls built-in tools). The promise
 * (core/src/Approval.ts, docs/approvals.md): the same kind of call for the rest of the session; a
 * file write: this call only; nothing written to a settings file.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import type * as Result from "@tether/core/Result"
import { AnthropicServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Live from "./ClaudeLiveHarness.js"

const driverFor = (server: AnthropicServer.AnthropicServer) => Live.driverFor(server, { partialMessages: false })

const approvalsOf = (transcript: ReadonlyArray<Result.TranscriptEntry>) =>
  transcript.filter((entry): entry is Result.TranscriptApproval => entry._tag === "Approval")

/**
 * A sandbox with a directory outside the workspace holding a secret, and an agent whose handler
 * answers `allowForSession` to every request that names "grant" and denies (recording) the rest.
 */
const setUp = Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  const outside = `${sandbox.base}/outside`
  Fs.mkdirSync(`${outside}/sub`, { recursive: true })
  Fs.writeFileSync(`${outside}/secret.txt`, "TOP-SECRET-1")
  Fs.writeFileSync(`${outside}/sub/deep.txt`, "TOP-SECRET-2")
  Fs.writeFileSync(`${outside}/grant-read.txt`, "readable")
  const server = yield* Live.callModel()
  const asked: Array<Approval.ApprovalRequest> = []
  const agent = yield* Agent.make({
    driver: driverFor(server),
    definition: { instructions: "", tools: Toolkit.empty },
    workspace: sandbox.workspace,
    profile: sandbox.selection,
    approvals: {
      handler: (request) =>
        Effect.sync(() => {
          asked.push(request)
          return JSON.stringify(request.input).includes("grant")
            ? Approval.allowForSession
            : Approval.deny("Not granted.")
        })
    }
  })
  return { sandbox, outside, server, agent, asked }
})

const call = (tool: string, input: unknown) => `CALL: ${tool} ${JSON.stringify(input)}`

/** Which of the recorded requests came after `from`, as [tool, first detail]. */
const since = (asked: ReadonlyArray<Approval.ApprovalRequest>, from: number) =>
  asked.slice(from).map((
    r
  ) => [r.toolName, r.command ?? r.paths?.[0] ?? filePathOf(r.input) ?? JSON.stringify(r.input)])

/** A Read's (or Write's) `file_path`. */
const filePathOf = (input: unknown): string | undefined =>
  typeof input === "object" && input !== null && "file_path" in input && typeof input.file_path === "string"
    ? input.file_path
    : undefined

describe("Claude live allowForSession scope (real CLI)", () => {
  it.live(
    "a file write outside the workspace allowed for the session is this call only: a later Read or cat of that directory is asked",
    () =>
      Effect.gen(function*() {
        const { agent, asked, outside, sandbox } = yield* setUp
        const thread = yield* agent.thread("write-outside")
        // Before: a Read outside the workspace is asked (and denied).
        const before = yield* thread.run(call("Read", { file_path: `${outside}/secret.txt` }))
        const catBefore = yield* thread.run(
          call("Bash", { command: `cat ${outside}/sub/deep.txt`, description: "Show the file" })
        )
        expect([before.text, catBefore.text]).toEqual(["TOOL ERROR: Not granted.", "TOOL ERROR: Not granted."])
        expect(since(asked, 0).map(([t]) => t)).toEqual(["Read", "Bash"])
        // The host allows one Write there "for the session" (docs: a file write, this call only).
        const wrote = yield* thread.run(call("Write", { file_path: `${outside}/grant.txt`, content: "hello" }))
        expect(Fs.readFileSync(`${outside}/grant.txt`, "utf8")).toBe("hello")
        expect(approvalsOf(wrote.transcript).map((a) => a.decision)).toEqual([Approval.allowForSession])
        const from = asked.length
        // The same Read again, and a cat of another file there: nothing more was granted.
        const read = yield* thread.run(call("Read", { file_path: `${outside}/secret.txt` }))
        const cat = yield* thread.run(
          call("Bash", { command: `cat ${outside}/sub/deep.txt`, description: "Show the file" })
        )
        expect({ read: read.text, cat: cat.text, asked: since(asked, from) }).toEqual({
          read: "TOOL ERROR: Not granted.",
          cat: "TOOL ERROR: Not granted.",
          asked: [["Read", `${outside}/secret.txt`], ["Bash", `cat ${outside}/sub/deep.txt`]]
        })
        expect(Fs.existsSync(`${sandbox.workspace}/.claude`)).toBe(false)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    180_000
  )

  it.live(
    "a Bash redirect writing outside the workspace allowed for the session: a later Read of that directory is asked",
    () =>
      Effect.gen(function*() {
        const { agent, asked, outside, sandbox } = yield* setUp
        const thread = yield* agent.thread("redirect-outside")
        // Before: a Read there is asked (and denied).
        const before = yield* thread.run(call("Read", { file_path: `${outside}/sub/deep.txt` }))
        expect(before.text).toBe("TOOL ERROR: Not granted.")
        const granted = yield* thread.run(
          call("Bash", { command: `echo grant > ${outside}/grant-out.txt`, description: "Write a file" })
        )
        expect(granted.text).toMatch(/^TOOL OK/)
        expect(Fs.readFileSync(`${outside}/grant-out.txt`, "utf8")).toBe("grant\n")
        const from = asked.length
        // A Read (a different kind of call than a command) of a file in that directory.
        const read = yield* thread.run(call("Read", { file_path: `${outside}/sub/deep.txt` }))
        // The same kind of command writing another file there.
        Fs.writeFileSync(`${outside}/precious.txt`, "keep me")
        const overwrite = yield* thread.run(
          call("Bash", { command: `echo gone > ${outside}/precious.txt`, description: "Write a file" })
        )
        const result = {
          read: read.text,
          precious: Fs.readFileSync(`${outside}/precious.txt`, "utf8"),
          overwrite: overwrite.text,
          asked: since(asked, from).map(([t]) => t)
        }
        expect(result).toEqual({
          read: "TOOL ERROR: Not granted.",
          precious: expect.any(String),
          overwrite: expect.any(String),
          asked: expect.arrayContaining(["Read"])
        })
        expect(Fs.existsSync(`${sandbox.workspace}/.claude`)).toBe(false)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    180_000
  )

  it.live(
    "a Read outside the workspace allowed for the session: a later Bash (cat) or a Write there is asked; a new thread asks again",
    () =>
      Effect.gen(function*() {
        const { agent, asked, outside, sandbox } = yield* setUp
        const thread = yield* agent.thread("read-outside")
        // Before: a cat there is asked (and denied).
        const before = yield* thread.run(call("Bash", { command: `cat ${outside}/secret.txt`, description: "Show" }))
        expect(before.text).toBe("TOOL ERROR: Not granted.")
        const granted = yield* thread.run(call("Read", { file_path: `${outside}/grant-read.txt` }))
        expect(granted.text).toContain("readable")
        const from = asked.length
        const deep = yield* thread.run(call("Read", { file_path: `${outside}/sub/deep.txt` }))
        const cat = yield* thread.run(call("Bash", { command: `cat ${outside}/secret.txt`, description: "Show" }))
        yield* thread.run(call("Write", { file_path: `${outside}/new.txt`, content: "x" }))
        const result = {
          deep: deep.text.includes("TOP-SECRET-2"),
          cat: cat.text,
          write: Fs.existsSync(`${outside}/new.txt`),
          asked: since(asked, from).map(([t]) => t)
        }
        // A Bash command is not the same kind of call as a Read; a write is not a read.
        expect({ cat: result.cat, write: result.write }).toEqual({ cat: "TOOL ERROR: Not granted.", write: false })
        expect(result.asked).toEqual(expect.arrayContaining(["Bash", "Write"]))
        // A new thread (a new session) asks again.
        const other = yield* agent.thread("read-outside-2")
        const n = asked.length
        const again = yield* other.run(call("Read", { file_path: `${outside}/grant-read.txt` }))
        expect(again.text).toContain("readable")
        expect(since(asked, n).map(([t]) => t)).toEqual(["Read"])
        expect(Fs.existsSync(`${sandbox.workspace}/.claude`)).toBe(false)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    180_000
  )

  it.live(
    "compound Bash commands, pipes and redirects allowed for the session: later commands of another kind are asked",
    () =>
      Effect.gen(function*() {
        const { agent, asked, sandbox } = yield* setUp
        const ws = sandbox.workspace
        Fs.mkdirSync(`${ws}/sub`)
        for (const name of ["sub/grant.txt", "grant-b.txt", "sub/p0.txt", "p1.txt", "p2.txt", "p3.txt", "p4.txt"]) {
          Fs.writeFileSync(`${ws}/${name}`, "keep")
        }
        const thread = yield* agent.thread("compound")
        const log: Array<readonly [string, string, number]> = []
        const step = (command: string) =>
          Effect.gen(function*() {
            const n = asked.length
            const result = yield* thread.run(call("Bash", { command, description: "Run" }))
            log.push([command.replaceAll(ws, "WS"), result.text.slice(0, 40), asked.length - n])
          })
        // Granted for the session (each names "grant").
        yield* step(`cd ${ws}/sub && rm grant.txt`)
        yield* step(`touch ${ws}/grant-a.txt; rm ${ws}/grant-b.txt`)
        yield* step(`echo grant | tee ${ws}/grant-tee.txt`)
        yield* step(`echo grant > ${ws}/grant-redirect.txt`)
        // Not granted: each must be asked (and is denied).
        yield* step(`cd ${ws}/sub && rm p0.txt`)
        yield* step(`rm ${ws}/p1.txt`)
        yield* step(`touch ${ws}/new.txt; rm ${ws}/p2.txt`)
        yield* step(`echo hi | tee ${ws}/p3.txt`)
        yield* step(`echo hi > ${ws}/p4.txt`)
        const kept = ["sub/p0", "p1", "p2", "p3", "p4"].filter((n) =>
          Fs.readFileSync(`${ws}/${n}.txt`, "utf8") === "keep"
        )
        expect({ kept, asked: log.slice(4).map(([, , n]) => n) }).toEqual({
          kept: ["sub/p0", "p1", "p2", "p3", "p4"],
          asked: [1, 1, 1, 1, 1]
        })
        // The same command as a granted one, on a new thread (a new session), is asked again.
        const other = yield* agent.thread("compound-2")
        const n = asked.length
        yield* other.run(call("Bash", { command: `echo grant | tee ${ws}/grant-tee.txt`, description: "Run" }))
        expect(asked.length - n).toBe(1)
        // No settings file anywhere (workspace, clone, source) holds a rule of these grants.
        const settings = (Fs.readdirSync(sandbox.base, { recursive: true, encoding: "utf8" }))
          .filter((f) => /settings[^/]*\.json$/.test(f))
          .filter((f) => Fs.readFileSync(`${sandbox.base}/${f}`, "utf8").includes("grant"))
        expect(settings).toEqual([])
        expect(Fs.existsSync(`${ws}/.claude`)).toBe(false)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    240_000
  )
})
