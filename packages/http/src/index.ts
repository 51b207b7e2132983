export * as AgentHttp from "./AgentHttp.js"
export * as AgUi from "./AgUi.js"
