/**
 * The real CLIs' drivers as the benches run them offline: each against its scripted model server
 * from `@tether/testing`, no retries; `binary` when the bench starts the CLI through something of
 * its own (`liveTurnSplit.ts`'s relay).
 */
import { Claude, Codex, Gemini } from "@tether/drivers"
import * as Redacted from "effect/Redacted"

const binaryOf = (binary: string | undefined) => binary === undefined ? {} : { binary }

/** Claude Code against an `AnthropicServer`'s `url`. */
export const claude = (url: string, binary?: string) =>
  Claude.driver({
    ...binaryOf(binary),
    env: {
      ANTHROPIC_BASE_URL: url,
      ANTHROPIC_API_KEY: Redacted.make("sk-ant-bench"),
      CLAUDE_CODE_MAX_RETRIES: "0"
    }
  })

/** Codex against a `ResponsesServer`'s `baseUrl`. */
export const codex = (baseUrl: string, binary?: string) =>
  Codex.driver({
    ...binaryOf(binary),
    model: "fake-model",
    modelProvider: {
      id: "fake",
      baseUrl,
      apiKey: Redacted.make("sk-bench"),
      requestMaxRetries: 0,
      streamMaxRetries: 0
    },
    settings: Codex.offlineSettings
  })

/** Gemini CLI against a `GeminiServer`'s `url`. */
export const gemini = (url: string, binary?: string) =>
  Gemini.driver({
    ...binaryOf(binary),
    model: "gemini-2.5-flash",
    env: { GOOGLE_GEMINI_BASE_URL: url, GEMINI_API_KEY: Redacted.make("bench") }
  })
