export * as AiToolkit from "./AiToolkit.js"
export * as TetherLanguageModel from "./TetherLanguageModel.js"
