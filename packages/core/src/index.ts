export * as Agent from "./Agent.js"
export * as AgentError from "./AgentError.js"
export * as Approval from "./Approval.js"
export * as Driver from "./Driver.js"
export * as Event from "./Event.js"
export * as Mcp from "./Mcp.js"
export * as Result from "./Result.js"
export * as Skill from "./Skill.js"
export * as StructuredOutput from "./StructuredOutput.js"
export * as Thread from "./Thread.js"
export * as ThreadStore from "./ThreadStore.js"
export * as ThreadStoreError from "./ThreadStoreError.js"
export * as ToolPolicy from "./ToolPolicy.js"

// Only at their own entry points: `SqlThreadStore` (it needs the optional peer `@effect/sql`) and
// `Unstable` (internals other packages use, with no stability promise).
