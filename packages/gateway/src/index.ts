export * as Gateway from "./Gateway.js"
