// Zipkin B3 trace context, read beside W3C traceparent as the reference reads it (its propagators:
// trace context, then B3, then baggage; a valid B3 context replaces a traceparent one). Both
// encodings: the single `b3` header (`{trace id}-{span id}[-{sampled}[-{parent span id}]]`, tried
// first) and the `x-b3-*` headers. Written by hand because OpenTelemetry's JavaScript B3 propagator
// reads other contexts than the reference's Go one (it keeps a context whose sampling state is not
// 0/1/d, or whose parent span id is malformed, and does not fall back from a malformed `b3` header
// to the `x-b3-*` ones: docs/decisions/010-b3-reader.md); this is the part a server needs (reading),
// with the reference's rules: 64-bit trace ids are padded to 128 bits, ids are lower-case hex
// and not all zeros, `d` (single) and `x-b3-flags: 1` mean debug and so sampled, `x-b3-sampled`
// takes `0`/`1`/`false`/`true`, no sampling state leaves the decision to the sampler (not sampled
// for a parent-based one), and anything malformed is ignored as a whole.
import {
  trace,
  TraceFlags,
  type Context,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
} from '@opentelemetry/api';

const SINGLE = 'b3';
const TRACE_ID = 'x-b3-traceid';
const SPAN_ID = 'x-b3-spanid';
const PARENT_SPAN_ID = 'x-b3-parentspanid';
const SAMPLED = 'x-b3-sampled';
const FLAGS = 'x-b3-flags';

const HEX16 = /^[0-9a-f]{16}$/;
const HEX32 = /^[0-9a-f]{32}$/;
const ZEROS = /^0+$/;

/** A 64- or 128-bit trace id as 32 hex digits, or undefined when it is not one. */
function traceIdOf(text: string): string | undefined {
  const id = text.length === 16 ? `0000000000000000${text}` : text;
  return HEX32.test(id) && !ZEROS.test(id) ? id : undefined;
}

const spanIdOk = (text: string): boolean => HEX16.test(text) && !ZEROS.test(text);

function first(getter: TextMapGetter, carrier: unknown, key: string): string {
  const v = getter.get(carrier, key);
  return (Array.isArray(v) ? v[0] : v) ?? '';
}

function remote(traceId: string, spanId: string, sampled: boolean): SpanContext {
  return { traceId, spanId, traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, isRemote: true };
}

/** The single `b3` header's context, or undefined (then the `x-b3-*` headers are read). */
function fromSingle(value: string): SpanContext | undefined {
  const parts = value.split('-');
  if (parts.length < 2 || parts.length > 4) return undefined; // a sampling state alone has no ids
  const traceId = traceIdOf(parts[0]!);
  if (traceId === undefined || !spanIdOk(parts[1]!)) return undefined;
  let sampled = false;
  if (parts.length >= 3) {
    const s = parts[2]!;
    if (s === '1' || s === 'd') sampled = true;
    else if (s !== '0') return undefined;
  }
  if (parts.length === 4 && !spanIdOk(parts[3]!)) return undefined;
  return remote(traceId, parts[1]!, sampled);
}

/** The `x-b3-*` headers' context, or undefined when absent or malformed. */
function fromMultiple(getter: TextMapGetter, carrier: unknown): SpanContext | undefined {
  const traceText = first(getter, carrier, TRACE_ID);
  const spanText = first(getter, carrier, SPAN_ID);
  const parentText = first(getter, carrier, PARENT_SPAN_ID);
  let sampled: boolean;
  switch (first(getter, carrier, SAMPLED).toLowerCase()) {
    case '1':
    case 'true':
      sampled = true;
      break;
    case '0':
    case 'false':
    case '':
      sampled = false;
      break;
    default:
      return undefined;
  }
  if (first(getter, carrier, FLAGS) === '1') sampled = true;
  if (traceText === '' || spanText === '') return undefined;
  const traceId = traceIdOf(traceText);
  if (traceId === undefined || !spanIdOk(spanText)) return undefined;
  if (parentText !== '' && !spanIdOk(parentText)) return undefined;
  return remote(traceId, spanText, sampled);
}

export class B3Propagator implements TextMapPropagator {
  extract(context: Context, carrier: unknown, getter: TextMapGetter): Context {
    const single = first(getter, carrier, SINGLE);
    const sc = (single !== '' ? fromSingle(single) : undefined) ?? fromMultiple(getter, carrier);
    return sc === undefined ? context : trace.setSpanContext(context, sc);
  }

  /** Writes the `x-b3-*` headers (the reference's default encoding); this service sends none itself. */
  inject(context: Context, carrier: unknown, setter: TextMapSetter): void {
    const sc = trace.getSpanContext(context);
    if (!sc || !trace.isSpanContextValid(sc)) return;
    setter.set(carrier, TRACE_ID, sc.traceId);
    setter.set(carrier, SPAN_ID, sc.spanId);
    setter.set(carrier, SAMPLED, (sc.traceFlags & TraceFlags.SAMPLED) !== 0 ? '1' : '0');
  }

  fields(): string[] {
    return [SINGLE, TRACE_ID, SPAN_ID, PARENT_SPAN_ID, SAMPLED, FLAGS];
  }
}

/** Whether a carrier holds any B3 header (a caller's trace may be followed at TRACING_SAMPLING_RATE=0). */
export function hasB3(get: (key: string) => readonly unknown[]): boolean {
  return get(SINGLE).length > 0 || get(TRACE_ID).length > 0;
}
