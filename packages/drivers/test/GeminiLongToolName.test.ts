/**
 * A hosted tool whose `mcp_tether_<name>` is over Gemini CLI 0.61's 63 characters: the CLI offers
 * it to the model under a shortened name (first 30 + `...` + last 30), and the driver allows it
 * under that name and reports the catalog's name back. Real CLI (pinned 0.61.0), offline against
 * the scripted GeminiServer, one-shot (`gemini -p`) and on a live thread (`gemini --acp`).
 */
import { NodeContext } from "@effect/platform-node"
import * as FileSystem from "@effect/platform/FileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import type * as Event from "@tether/core/Event"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Path from "node:path"

const longName = "lookup_issue_in_the_tracker_by_its_key_and_return_the_title_now"
/** What Gemini CLI 0.61 calls it: `mcp_tether_<name>` is 74 characters. */
const shortened = "mcp_tether_lookup_issue_in_the...s_key_and_return_the_title_now"

const input = { key: Schema.String }
const output = Schema.Struct({ title: Schema.String })
const LongLookup = Tool.make(longName, {
  description: "Look up one issue by key and return its title.",
  input,
  output,
  revision: "long/v1"
})
const LookupIssue = Tool.make("lookup_issue", { description: "Look up one issue.", input, output, revision: "l/v1" })
const Tools = Toolkit.make(LongLookup, LookupIssue)

const toolsLive = (looked: Array<string>) =>
  Tools.toLayer({
    [longName]: ({ key }: { readonly key: string }) =>
      Effect.sync(() => {
        looked.push(key)
        return { title: `LONG-TITLE-OF-${key}` }
      }),
    lookup_issue: ({ key }: { readonly key: string }) => Effect.succeed({ title: `short ${key}` })
  })

const runTurn = (mode: "one-shot" | "live") =>
  Effect.gen(function*() {
    const looked: Array<string> = []
    const server = yield* GeminiServer.make({
      script: [GeminiServer.callTool(shortened, { key: "ISSUE-7" })],
      respond: GeminiServer.roundTrip(
        () => GeminiServer.reply("no call"),
        (responses) => GeminiServer.reply(responses.map((r) => r.output).join("|"))
      )
    })
    const sandbox = yield* Harness.sandbox
    const events = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: Gemini.driver({
          model: "gemini-2.5-flash",
          env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
        }),
        definition: { instructions: "", tools: Tools },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      if (mode === "one-shot") return Array.from(yield* Stream.runCollect(agent.stream("Look up ISSUE-7.")))
      const thread = yield* agent.thread("long")
      return Array.from(yield* Stream.runCollect(thread.stream("Look up ISSUE-7.")))
    }).pipe(
      Effect.scoped,
      Effect.provide([toolsLive(looked), Harness.layer])
    )
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return { events, looked, generations: yield* server.generations }
  }).pipe(Effect.scoped)

describe("Gemini: a hosted tool whose name Gemini shortens (real CLI)", () => {
  for (const mode of ["one-shot", "live"] as const) {
    it.live(`${mode}: offered, called, and reported under the catalog's name`, () =>
      Effect.gen(function*() {
        const { events, generations, looked } = yield* runTurn(mode)
        const offered = GeminiServer.declaredTools(generations[0]!).filter((n) => n.startsWith("mcp_")).sort()
        expect(offered).toEqual(["mcp_tether_lookup_issue", shortened])
        expect(looked).toEqual(["ISSUE-7"])
        expect(GeminiServer.functionResponses(generations[1]!)[0]?.output).toContain("LONG-TITLE-OF-ISSUE-7")
        const calls = events.filter((e): e is Event.ToolCall => e._tag === "ToolCall")
        expect(calls.map((c) => [c.phase, c.name, c.source])).toEqual([
          ["start", longName, "host"],
          ["end", longName, "host"]
        ])
        const finished = events.at(-1)
        expect(finished?._tag === "RunFinished" && finished.outcome).toBe("success")
      }), 120_000)
  }
})

const request = (profileDir: string, tools: ReadonlyArray<string>): Driver.InvocationRequest => ({
  runId: "run-1",
  prompt: "hi",
  model: undefined,
  profileDir,
  siblings: { home: "/r/home", tmp: "/r/tmp" },
  workspace: "/srv/repo",
  hosted: { key: "tether", url: "http://127.0.0.1:4567/mcp", tokenVariable: "TETHER_TOKEN_X", tools },
  instructions: "",
  skills: [],
  mcp: [],
  session: { _tag: "New", id: "11111111-1111-4111-8111-111111111111" },
  sandbox: undefined,
  hostEnv: {}
})

describe("Gemini: the parser", () => {
  it.effect("names a shortened hosted tool as the catalog does, from the run's tools in its context", () =>
    Effect.gen(function*() {
      const lines = [
        JSON.stringify({ type: "init", session_id: "11111111-1111-4111-8111-111111111111", model: "m" }),
        JSON.stringify({ type: "tool_use", tool_name: shortened, tool_id: "c1", parameters: { key: "K" } }),
        JSON.stringify({ type: "tool_result", tool_id: "c1", status: "success", output: "ok" }),
        JSON.stringify({ type: "tool_use", tool_name: "mcp_tether_lookup_issue", tool_id: "c2", parameters: {} }),
        JSON.stringify({ type: "result", status: "success", stats: {} })
      ]
      const callsOf = (hostedTools?: ReadonlyArray<string>) => {
        const context: Driver.ParseContext = {
          hostedKey: "tether",
          session: { _tag: "New", id: "11111111-1111-4111-8111-111111111111" },
          ...(hostedTools === undefined ? {} : { hostedTools })
        }
        return Stream.runCollect(Gemini.parse(Stream.fromIterable(lines), context)).pipe(
          Effect.map((chunk) =>
            Array.from(chunk).flatMap((o) => o._tag === "ToolCall" ? [[o.phase, o.name, o.source]] : [])
          )
        )
      }
      expect(yield* callsOf([longName, "lookup_issue"])).toEqual([
        ["start", longName, "host"],
        ["end", longName, "host"],
        ["start", "lookup_issue", "host"]
      ])
      // Without the run's tools: as Gemini named it, by the hosted prefix.
      expect((yield* callsOf(undefined))[0]).toEqual(["start", shortened.slice("mcp_tether_".length), "host"])
      // Not one of the run's tools: another server's, under Gemini's whole name.
      expect((yield* callsOf(["lookup_issue"]))[0]).toEqual(["start", shortened, "mcp"])
    }))
})

describe("Gemini: hosted tools Gemini would name alike", () => {
  it.effect("are refused before spawn, naming both tools", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "tether-gemini-long-" })
      yield* fs.makeDirectory(Path.join(dir, ".gemini"))
      // Same first 19 and last 30 characters; and a 52-character name spelled like the shortened one.
      const twin = "lookup_issue_in_the_other_tracker_by_its_key_and_return_the_title_now"
      const spelled = shortened.slice("mcp_tether_".length)
      const driver = Gemini.driver({ binary: "gemini" })
      for (const other of [twin, spelled]) {
        const tools = [longName, other].sort()
        for (const open of [driver.prepare, driver.live!.open]) {
          const refused = yield* Effect.either(open(request(dir, tools)))
          expect(Either.isLeft(refused) && refused.left.reason).toBe("HostedToolsUnavailable")
          expect(Either.isLeft(refused) && refused.left.detail).toContain(`"${longName}"`)
          expect(Either.isLeft(refused) && refused.left.detail).toContain(`"${other}"`)
        }
      }
      // Either one alone is fine.
      expect(Either.isRight(yield* Effect.either(driver.prepare(request(dir, [longName]))))).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))
})
