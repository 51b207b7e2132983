/**
 * docs/writing-a-driver.md followed by a third-party driver author: a minimal driver of one's own,
 * written as the guide says (its own CLI with its own JSON-lines protocol, `parseFromLines`, an
 * MCP file naming `hosted.tokenVariable`, a layout whose `sessions`/`sessionOf` name the session
 * files the CLI writes and whose `logs` name its per-process log), passes every clause; a subject
 * whose crash turn does not crash fails C8 by name.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Driver } from "@tether/core"
import { parseFromLines } from "@tether/core/Driver"
import { ProfileLayout } from "@tether/profile"
import { Conformance, Reference } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as NodeProcess from "node:process"

describe("a subject whose crash turn succeeds", () => {
  it.live(
    "fails C8 with ConformanceFailure naming it (not with the run's success value)",
    () =>
      Effect.gen(function*() {
        const subject: Conformance.Subject = {
          driver: Reference.driver(), // answers every prompt, "Exit mid-turn." too
          plain: "Say hi.",
          slow: "Take your time.",
          crash: "Exit mid-turn."
        }
        const c8 = Conformance.clauses(subject).find((clause) => clause.id === "C8")!
        const error = yield* Effect.flip(c8.run)
        expect(error).toMatchObject({ _tag: "ConformanceFailure", clause: "C8" })
        expect(String((error as { readonly message?: unknown }).message)).toContain("the crash turn succeeded")
      }),
    90_000
  )
})

// "mycli": prompt as its last argument, profile in $MYCLI_HOME; writes its session transcript to
// sessions/<id>.jsonl and a per-process log to logs/<pid>.log; prints its own JSON-lines protocol.
const myCliProgram = `(() => {
const fs = require("fs"), path = require("path");
const args = process.argv.slice(1);
const home = process.env.MYCLI_HOME;
const prompt = args[args.length - 1];
const at = args.indexOf("--resume");
const id = at >= 0 ? args[at + 1] : args[args.indexOf("--session-id") + 1];
fs.mkdirSync(path.join(home, "sessions"), { recursive: true });
fs.mkdirSync(path.join(home, "logs"), { recursive: true });
fs.appendFileSync(path.join(home, "logs", process.pid + ".log"), "started\\n");
fs.appendFileSync(path.join(home, "sessions", id + ".jsonl"), JSON.stringify({ prompt }) + "\\n");
const out = (o) => process.stdout.write(JSON.stringify(o) + "\\n");
out({ type: "init", session: id, model: "my-model" });
if (prompt === "slow") { setTimeout(() => {}, 60000); return; }
out({ type: "delta", text: prompt });
if (prompt === "crash") { process.stdout.write("", () => process.exit(3)); return; }
out({ type: "result", ok: true, text: prompt, session: id, tokensIn: 3, tokensOut: 4 });
})()`

const myLayout = ProfileLayout.make({
  provider: "mycli",
  selectorEnv: ["MYCLI_HOME"],
  nativeDefault: (env) => `${env["HOME"] ?? "/nonexistent"}/.mycli`,
  classes: { settings: ["settings.json"], mcp: [], skills: [], auth: ["auth.json"], sessions: ["sessions"] },
  sessionOf: (path) => /^sessions\/(.+)\.jsonl$/.exec(path)?.[1],
  reserved: ["mcp.json"],
  siblings: [],
  logs: { profile: ["logs/*.log"] }
})

const myParse: Driver.Driver["parse"] = parseFromLines(() => (line): Driver.LineOutputs => {
  let record: any
  try {
    record = JSON.parse(line)
  } catch {
    return { _tag: "Notice", level: "warning", kind: "malformed", message: line.slice(0, 200) }
  }
  switch (record?.type) {
    case "init":
      return { _tag: "SessionStarted", sessionId: record.session, model: record.model }
    case "delta":
      return { _tag: "TextDelta", text: record.text }
    case "result":
      return [{ _tag: "Message", role: "assistant", text: record.text }, {
        _tag: "Terminal",
        ok: record.ok,
        text: record.text,
        usage: { inputTokens: record.tokensIn, outputTokens: record.tokensOut },
        model: "my-model",
        session: record.session,
        error: undefined,
        raw: record
      }]
    default:
      return { _tag: "Notice", level: "info", kind: "unknown", message: line.slice(0, 200) }
  }
})

const myDriver: Driver.Driver = {
  name: "mycli",
  capabilities: {
    resume: true,
    fork: false,
    mcpTransports: ["http"],
    instructions: true,
    skillsProjection: false,
    sandbox: ["workspaceWrite"],
    toolAllowList: false,
    streamingInput: false,
    structuredOutput: "instruction",
    persistentProcess: false
  },
  layout: myLayout,
  prepare: (request) =>
    Effect.succeed({
      command: NodeProcess.execPath,
      args: [
        "-e",
        myCliProgram,
        "--",
        ...(request.session._tag === "Resume"
          ? ["--resume", request.session.id]
          : ["--session-id", request.session.id]),
        request.prompt
      ],
      env: { PATH: request.hostEnv["PATH"] ?? "/usr/bin:/bin", MYCLI_HOME: request.profileDir },
      cwd: request.workspace,
      stdin: undefined,
      files: [{
        path: "mcp.json",
        content: JSON.stringify({
          mcpServers: {
            [request.hosted.key]: {
              url: request.hosted.url,
              headers: { Authorization: `Bearer \${${request.hosted.tokenVariable}}` }
            }
          }
        })
      }]
    }),
  parse: myParse
}

describe("a minimal third-party driver written per the guide passes the conformance suite", () => {
  const subject: Conformance.Subject = {
    driver: myDriver,
    plain: "hello",
    plainText: "hello",
    slow: "slow",
    crash: "crash"
  }
  for (const clause of Conformance.clauses(subject)) {
    it.live(`${clause.id} ${clause.title}`, () => clause.run, 90_000)
  }
})
