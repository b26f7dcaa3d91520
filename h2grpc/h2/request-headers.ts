// The checks RFC 9113 section 8.2-8.3 makes on a request's header section, and the headers object the
// gRPC layer reads (lower-case names, pseudo-headers included, repeated fields joined as node:http2 joins
// them). A malformed request is a stream error (PROTOCOL_ERROR), never the connection's.

export type RequestHeaders = Record<string, string>;

const REQUEST_PSEUDO = new Set([':method', ':scheme', ':path', ':authority']);
const BAD_VALUE = /[\0\r\n]/;
const CONNECTION_SPECIFIC = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
]);

/** The header object of a request's flat [name, value, ...] fields, or the reason it is malformed. */
export function requestHeaders(fields: readonly string[]): RequestHeaders | string {
  const h: RequestHeaders = Object.create(null) as RequestHeaders;
  let regularSeen = false;
  // The value last found valid: a block that references one large HPACK table entry many times has it
  // checked once, not once per reference.
  let checked: string | undefined;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    const bad = fieldError(name, value, value === checked);
    if (bad !== undefined) return bad;
    checked = value;
    if (name.charCodeAt(0) === 58 /* : */) {
      if (regularSeen) return `pseudo-header ${name} after a regular field`;
      if (!REQUEST_PSEUDO.has(name)) return `pseudo-header ${name} is not a request pseudo-header`;
      if (h[name] !== undefined) return `pseudo-header ${name} repeated`;
      h[name] = value;
      continue;
    }
    regularSeen = true;
    const prev = h[name];
    h[name] = prev === undefined ? value : `${prev}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  if (h[':method'] === undefined) return 'no :method';
  if (h[':method'] !== 'CONNECT') {
    if (h[':scheme'] === undefined) return 'no :scheme';
    if (h[':path'] === undefined || h[':path'] === '') return 'no :path';
  }
  const cl = h['content-length'];
  if (cl !== undefined && !/^[0-9]{1,15}$/.test(cl)) return 'content-length is not a number';
  return h;
}

/** Why trailers are malformed, or undefined. */
export function trailersError(fields: readonly string[]): string | undefined {
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (name.charCodeAt(0) === 58) return `pseudo-header ${name} in trailers`;
    const bad = fieldError(name, fields[i + 1]!);
    if (bad !== undefined) return bad;
  }
  return undefined;
}

function fieldError(name: string, value: string, valueChecked = false): string | undefined {
  if (name.length === 0) return 'empty field name';
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c >= 65 && c <= 90) return `field name ${name} has upper-case letters`;
    if (c <= 32 || c >= 127 || (c === 58 && i > 0)) return `field name has an invalid character`;
  }
  if (CONNECTION_SPECIFIC.has(name)) return `connection-specific field ${name}`;
  if (name === 'te' && value !== 'trailers') return 'te other than "trailers"';
  if (!valueChecked && BAD_VALUE.test(value)) return `field ${name} has NUL, CR or LF in its value`;
  return undefined;
}
