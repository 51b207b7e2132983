export * as Profile from "./Profile.js"
export * as ProfileLayout from "./ProfileLayout.js"
