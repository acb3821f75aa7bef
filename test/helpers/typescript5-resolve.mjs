/** The resolve hook of typescript5-hook.mjs (module hooks run in their own thread, from their own module). */
export async function resolve(specifier, context, next) {
  if (specifier === 'typescript' && context.parentURL?.includes('/node_modules/openapi-typescript/')) return next('typescript5', context);
  return next(specifier, context);
}
