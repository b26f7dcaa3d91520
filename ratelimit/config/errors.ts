/**
 * A configuration error: names the document (`source`, e.g. a file path or resource name) and the
 * offending field (`descriptors[0].rate_limit.unit`; '' for the document as a whole). `detail` is the
 * reference's wording without the prefixes.
 */
export class ConfigError extends Error {
  readonly source: string;
  readonly field: string;
  readonly detail: string;

  constructor(source: string, field: string, detail: string) {
    super(field === '' ? `${source}: ${detail}` : `${source}: ${field}: ${detail}`);
    this.name = 'ConfigError';
    this.source = source;
    this.field = field;
    this.detail = detail;
  }
}
