/**
 * A small external MCP server over stdio (`bin/mcp-stdio-server.mjs`, a real Node program using
 * the official MCP SDK) for tests of external MCP sources declared beside the hosted tools.
 *
 * It exposes one tool, `stamp` (`{ text }` → `"STAMP:<text>:<suffix>"`, where `<suffix>` is the
 * server's `STAMP_SUFFIX` environment variable or `none`). With `STAMP_LOG` set to a file it
 * appends one JSON line per MCP request (`{ method, params?, pid }`).
 *
 * @since 0.1.0
 */
import * as Mcp from "@tether/core/Mcp"
import { createRequire } from "node:module"
import * as NodePath from "node:path"

/**
 * Absolute path of the server program.
 *
 * @since 0.1.0
 * @category constants
 */
export const path: string = NodePath.join(
  NodePath.dirname(createRequire(import.meta.url).resolve("@tether/testing/package.json")),
  "bin",
  "mcp-stdio-server.mjs"
)

/**
 * The name of the server's only tool.
 *
 * @since 0.1.0
 * @category constants
 */
export const toolName = "stamp" as const

/**
 * What `stamp` answers for `text` with the given suffix.
 *
 * @since 0.1.0
 * @category constants
 */
export const stamp = (text: string, suffix = "none"): string => `STAMP:${text}:${suffix}`

/**
 * An `Mcp.stdio` source that runs the server with this process's Node (no `PATH` lookup).
 *
 * @since 0.1.0
 * @category constructors
 */
export const source = (
  key: string,
  options: { readonly suffix?: string; readonly log?: string; readonly tools?: ReadonlyArray<string> } = {}
): Mcp.Source =>
  Mcp.stdio(key, process.execPath, [path], {
    ...(options.suffix === undefined ? {} : { STAMP_SUFFIX: options.suffix }),
    ...(options.log === undefined ? {} : { STAMP_LOG: options.log })
  }, options.tools === undefined ? undefined : { tools: options.tools })
