export * as Runner from "./Runner.js"
export * as ThreadEntity from "./ThreadEntity.js"
