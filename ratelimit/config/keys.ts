// The composite key of a descriptor entry: its own module, so that the compiled matcher needs neither
// the validator nor its JSON Schema library (the service's main thread loads no ajv).
/** The reference's composite key of an entry: `key`, or `key_value` when the value is not empty. */
export function compositeKey(key: string, value: string | undefined): string {
  return value === undefined || value === '' ? key : `${key}_${value}`;
}
