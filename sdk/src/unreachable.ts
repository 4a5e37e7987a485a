/**
 * The `default` of a switch that covers every member of a union: it does not compile while a
 * member is left out (the union grew), and it throws if a value the types did not foresee arrives
 * at run time (a cast, or data from outside), instead of passing over it in silence.
 */
export function unreachable(value: never, what: string): never {
  const seen: unknown = value;
  const tag: unknown =
    typeof seen === 'object' && seen !== null
      ? ((seen as { readonly kind?: unknown }).kind ?? (seen as { readonly type?: unknown }).type)
      : seen;
  const name = typeof tag === 'string' || typeof tag === 'number' ? String(tag) : typeof tag;
  throw new Error(`unhandled ${what}: ${name}`);
}
