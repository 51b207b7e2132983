// TypeDoc plugin: names each public module as users import it. TypeDoc names a module by its
// path below the common root (`core/src/Agent`); a user imports `@tether/core/Agent`.
import { Converter, ReflectionKind } from "typedoc"

export function load(app) {
  app.converter.on(Converter.EVENT_RESOLVE_BEGIN, (context) => {
    for (const module of context.project.getReflectionsByKind(ReflectionKind.Module)) {
      const match = /^([^/]+)\/src\/([^/]+)$/.exec(module.name)
      if (match !== null) module.name = `@tether/${match[1]}/${match[2]}`
    }
  })
}
