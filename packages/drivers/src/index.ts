export * as Claude from "./Claude.js"
export * as Codex from "./Codex.js"
export * as Cursor from "./Cursor.js"
export * as Gemini from "./Gemini.js"
