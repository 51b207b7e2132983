/**
 * The reference driver: the smallest correct implementation of the driver SPI. Its "provider"
 * is an in-memory script (`respond(prompt)`) replayed by a tiny Node process whose stdout
 * protocol is the SPI's own `Driver.Output`, one JSON object per line. It passes the
 * conformance suite and is the model for third-party drivers.
 *
 * @since 0.1.0
 */
import type { Driver } from "@tether/core"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as NodeProcess from "node:process"

/**
 * One step of the in-memory provider: an output to print, or a behaviour of the process.
 *
 * @since 0.1.0
 * @category models
 */
export type Step =
  | Driver.Output
  | { readonly _tag: "$sleep"; readonly ms: number }
  | { readonly _tag: "$exit"; readonly code: number }
  | { readonly _tag: "$hang" }

/**
 * The reference driver's behaviour for a prompt and its capabilities.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The provider's behaviour for a prompt (default: `answer(prompt)`). */
  readonly respond?: (prompt: string) => ReadonlyArray<Step>
  readonly capabilities?: Partial<Driver.Capabilities>
}

/**
 * A plain successful answer echoing the prompt.
 *
 * @since 0.1.0
 * @category constructors
 */
export const answer = (prompt: string, session = "reference-session"): ReadonlyArray<Step> => [
  { _tag: "SessionStarted", sessionId: session, model: "reference-model" },
  { _tag: "TextDelta", text: prompt },
  { _tag: "Message", role: "assistant", text: prompt },
  {
    _tag: "Terminal",
    ok: true,
    text: prompt,
    usage: { inputTokens: prompt.length, outputTokens: prompt.length },
    model: "reference-model",
    session,
    error: undefined,
    raw: { answered: prompt }
  }
]

// Replays its stdin: prints output lines, performs `$` steps (`$exit` once stdout is flushed).
const program = `
const lines = require("fs").readFileSync(0, "utf8").split("\\n").filter(Boolean);
(async () => {
  for (const line of lines) {
    const step = JSON.parse(line);
    if (step._tag === "$sleep") await new Promise((r) => setTimeout(r, step.ms));
    else if (step._tag === "$exit") { process.stdout.write("", () => process.exit(step.code)); return; }
    else if (step._tag === "$hang") { process.on("SIGTERM", () => {}); setInterval(() => {}, 1 << 30); return; }
    else process.stdout.write(line + "\\n");
  }
})();
`

const isOutput = (value: unknown): value is Driver.Output =>
  value !== null && typeof value === "object" && typeof (value as { readonly _tag?: unknown })._tag === "string"

/**
 * Parses the reference protocol: each line is a JSON `Driver.Output`; anything else is a
 * `Notice`.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse = (lines: Stream.Stream<string>): Stream.Stream<Driver.Output, Driver.ProtocolError> =>
  lines.pipe(Stream.mapChunks((chunk) =>
    Chunk.map(chunk, (line): Driver.Output => {
      try {
        const value: unknown = JSON.parse(line)
        if (isOutput(value)) return value
      } catch {
        // not the protocol
      }
      return { _tag: "Notice", level: "warning", kind: "malformed", message: line.slice(0, 200) }
    })
  ))

/**
 * The reference driver: a minimal complete driver (a Node script as its CLI) that passes the
 * conformance suite. Read it as the model of a third-party driver.
 *
 * @since 0.1.0
 * @category constructors
 */
export const driver = (options: Options = {}): Driver.Driver => ({
  name: "reference",
  capabilities: {
    resume: false,
    fork: false,
    mcpTransports: ["http"],
    instructions: true,
    skillsProjection: false,
    sandbox: ["readOnly", "workspaceWrite"],
    toolAllowList: false,
    streamingInput: false,
    structuredOutput: "instruction",
    persistentProcess: false,
    ...options.capabilities
  },
  layout: {
    provider: "reference",
    selectorEnv: ["REFERENCE_HOME"],
    nativeDefault: (env) => `${env["HOME"] ?? "/nonexistent"}/.reference`,
    classes: { settings: ["settings.json"], mcp: [], skills: [], auth: ["auth.json"] },
    reserved: ["mcp.json"],
    siblings: []
  },
  prepare: (request) =>
    Effect.succeed({
      command: NodeProcess.execPath,
      args: ["-e", program],
      env: { PATH: request.hostEnv["PATH"] ?? "/usr/bin:/bin", REFERENCE_HOME: request.profileDir },
      cwd: request.workspace,
      stdin: (options.respond ?? answer)(request.prompt).map((step) => JSON.stringify(step)).join("\n") + "\n",
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
  parse
})
