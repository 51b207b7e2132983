import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Claude, Codex, Gemini } from "@tether/drivers"
import { AnthropicServer, ResponsesServer } from "@tether/testing"
import * as GeminiServer from "@tether/testing/GeminiServer"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { baseRequest, claudeBinary, mcpServer, runTurn, tempRoot } from "./ClaudeHarness.js"

const token = "codex-cli-test-token-6a1f0d"
const driverFor = (server: ResponsesServer.ResponsesServer) =>
  Codex.driver({
    model: "fake-model",
    modelProvider: { id: "fake", baseUrl: server.baseUrl, envKey: "FAKE_OPENAI_KEY", requestMaxRetries: 0, streamMaxRetries: 0 },
    settings: Codex.offlineSettings,
    env: { FAKE_OPENAI_KEY: Redacted.make("sk-fake-codex") }
  })
const terminal = (outputs: ReadonlyArray<Driver.Output>) => outputs.find((o): o is Driver.Terminal => o._tag === "Terminal")
const tree = (dir: string): Array<string> => (Fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as Array<Fs.Dirent>).filter((d) => !d.isDirectory()).map((d) => Path.relative(dir, Path.join(d.parentPath, d.name))).sort()

describe("explore", () => {
  it.live("codex", () =>
    Effect.gen(function*() {
      const a = yield* tempRoot
      const b = yield* tempRoot
      const mcp = yield* mcpServer(token)
      const server = yield* ResponsesServer.make({ script: (r) => ResponsesServer.text(`answer ${r.index}`) })
      const driver = driverFor(server)
      const first = yield* runTurn(driver, baseRequest(a, mcp.url, { prompt: "first question" }), token)
      const thread = terminal(first.outputs)!.session!
      console.log("A", JSON.stringify(tree(a.profile).filter((f) => !f.startsWith("skills/"))), JSON.stringify(tree(a.home)), tree(a.tmp).length)
      const keep = (process.env["KEEP"] ?? "sessions").split(",")
      for (const rel of tree(a.profile)) {
        if (keep.some((k) => rel.startsWith(k))) {
          Fs.mkdirSync(Path.dirname(Path.join(b.profile, rel)), { recursive: true })
          Fs.copyFileSync(Path.join(a.profile, rel), Path.join(b.profile, rel))
        }
      }
      console.log("B before", tree(b.profile))
      const second = yield* runTurn(driver, baseRequest(b, mcp.url, { prompt: "second question", session: { _tag: "Resume", id: thread } }), token)
      console.log("exit", second.exitCode, second.stderr.slice(0, 2000))
      console.log("B after", JSON.stringify(tree(b.profile).filter((f) => !f.startsWith("skills/"))))
      const requests = yield* server.requests
      console.log(JSON.stringify(ResponsesServer.userTexts(requests[1] ?? requests[0]!)))
      expect(second.exitCode).toBe(0)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)

  it.live("claude", () =>
    Effect.gen(function*() {
      const a = yield* tempRoot
      const b0 = yield* tempRoot
      const b = { ...b0, work: a.work }
      const mcp = yield* mcpServer(token)
      const server = yield* AnthropicServer.make({ script: [AnthropicServer.reply("first answer"), AnthropicServer.reply("second answer")] })
      const driver = Claude.driver({ binary: claudeBinary, env: { ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"), CLAUDE_CODE_MAX_RETRIES: "0" } })
      const first = yield* runTurn(driver, baseRequest(a, mcp.url, { prompt: "first question" }), token)
      const thread = terminal(first.outputs)!.session!
      console.log("A", JSON.stringify(tree(a.profile)), JSON.stringify(tree(a.home)), tree(a.tmp).length)
      const keep = (process.env["KEEP"] ?? "projects").split(",")
      for (const rel of tree(a.profile)) {
        if (keep.some((k) => rel.startsWith(k))) {
          Fs.mkdirSync(Path.dirname(Path.join(b.profile, rel)), { recursive: true })
          Fs.copyFileSync(Path.join(a.profile, rel), Path.join(b.profile, rel))
        }
      }
      console.log("B before", JSON.stringify(tree(b.profile)))
      const second = yield* runTurn(driver, baseRequest(b, mcp.url, { prompt: "second question", session: { _tag: "Resume", id: thread } }), token)
      console.log("exit", second.exitCode, second.stderr.slice(0, 2000), JSON.stringify(second.outputs).slice(0, 1000))
      console.log("B after", JSON.stringify(tree(b.profile)))
      const messages = yield* server.messages
      console.log(JSON.stringify(AnthropicServer.transcript(messages[messages.length - 1]!)))
      expect(second.exitCode).toBe(0)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)

  it.live("gemini", () =>
    Effect.gen(function*() {
      const a = yield* tempRoot
      const b0 = yield* tempRoot
      const b = { ...b0, work: a.work }
      Fs.mkdirSync(`${a.profile}/.gemini`)
      const mcp = yield* mcpServer(token)
      const model = yield* GeminiServer.make({ respond: (request) => GeminiServer.reply(`turn ${GeminiServer.transcript(request).length}`) })
      const driver = Gemini.driver({ model: "gemini-2.5-flash", env: { GOOGLE_GEMINI_BASE_URL: model.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") } })
      const id = crypto.randomUUID()
      const first = yield* runTurn(driver, baseRequest(a, mcp.url, { prompt: "first question", session: { _tag: "New", id } }), token)
      console.log("first", first.exitCode, first.stderr.slice(0, 500))
      console.log("A", JSON.stringify(tree(a.profile)), JSON.stringify(tree(a.home)), tree(a.tmp).length)
      const keep = (process.env["KEEP"] ?? ".gemini/tmp,.gemini/projects.json").split(",")
      for (const rel of tree(a.profile)) {
        if (keep.some((k) => rel.startsWith(k))) {
          Fs.mkdirSync(Path.dirname(Path.join(b.profile, rel)), { recursive: true })
          Fs.copyFileSync(Path.join(a.profile, rel), Path.join(b.profile, rel))
        }
      }
      Fs.mkdirSync(`${b.profile}/.gemini`, { recursive: true })
      console.log("B before", JSON.stringify(tree(b.profile)))
      const second = yield* runTurn(driver, baseRequest(b, mcp.url, { prompt: "second question", session: { _tag: "Resume", id } }), token)
      console.log("exit", second.exitCode, second.stderr.slice(0, 2000))
      console.log("B after", JSON.stringify(tree(b.profile)))
      const gens = yield* model.generations
      console.log(JSON.stringify(GeminiServer.transcript(gens.at(-1)!)))
      expect(second.exitCode).toBe(0)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)
})
