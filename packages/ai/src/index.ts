export * as AiToolkit from "./AiToolkit.js"
