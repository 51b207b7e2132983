/**
 * The fake Cursor CLI (`bin/cursor-agent.mjs`, a real Node program): the hermetic stand-in for
 * Cursor's `agent`, which is not published on npm.
 *
 * It behaves like the real CLI where Tether depends on it: `agent -p --output-format stream-json
 * --workspace <dir> [--resume <id>] [--model m] [--force] --approve-mcps --trust`, prompt on
 * stdin; it reads `mcp.json` from `$CURSOR_CONFIG_DIR`, resolves `${env:VAR}` in its headers from
 * its environment, checks that each MCP endpoint refuses a request without the credential (401;
 * anything else fails the turn), performs `initialize` / `tools/list` / `tools/call` with the
 * official MCP SDK client, writes its chat under `$CURSOR_DATA_DIR/chats/`, and emits Cursor
 * stream-json records (`system/init`, `user`, `thinking`, `assistant`, `tool_call` with
 * `mcpToolCall`, `result`). `--resume` of an unknown session exits 1 with
 * `Error: session <id> not found …` on stderr.
 *
 * Its "model" is scripted by the prompt, one directive per line: `@call <tool> <json-args>`,
 * `@say <text>`, `@think <text>`, `@fail <message>`, `@sleep <ms>`, `@crash <code>`. Without
 * `@say` the final text is `turn <n>` (the turn number within the session) followed by
 * `; <tool> -> <result text>` per tool call.
 *
 * @since 0.1.0
 */
import type * as Cursor from "@tether/drivers/Cursor"
import { createRequire } from "node:module"
import * as NodePath from "node:path"

/**
 * Absolute path of the fake `agent` program (executable, `#!/usr/bin/env node`).
 *
 * @since 0.1.0
 * @category constants
 */
export const path: string = NodePath.join(
  NodePath.dirname(createRequire(import.meta.url).resolve("@tether/testing/package.json")),
  "bin",
  "cursor-agent.mjs"
)

/**
 * The `Cursor.driver` configuration that runs the fake with this process's Node (no `PATH`
 * lookup needed).
 *
 * @since 0.1.0
 * @category constructors
 */
export const config = (options: Omit<Cursor.Config, "binary" | "binaryArgs"> = {}): Cursor.Config => ({
  ...options,
  binary: process.execPath,
  binaryArgs: [path]
})

/**
 * A prompt line that makes the fake call `tool` with `args` (`tool` or `<server>.<tool>`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const call = (tool: string, args: unknown = {}): string => `@call ${tool} ${JSON.stringify(args)}`

/**
 * A prompt line that sets the fake's final assistant text.
 *
 * @since 0.1.0
 * @category constructors
 */
export const say = (text: string): string => `@say ${text}`

/**
 * A prompt line that makes the fake end the turn with a failed result record.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fail = (message: string): string => `@fail ${message}`
