// Plain JSON values to google.protobuf.Struct / Value messages (as grpc-js and protobufjs object form).

export type StructValue =
  | { nullValue: 'NULL_VALUE' }
  | { numberValue: number }
  | { stringValue: string }
  | { boolValue: boolean }
  | { structValue: { fields: Record<string, StructValue> } }
  | { listValue: { values: StructValue[] } };

export function toValue(v: unknown): StructValue {
  if (v === null || v === undefined) return { nullValue: 'NULL_VALUE' };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  return { structValue: toStruct(v as Record<string, unknown>) };
}

export function toStruct(obj: Record<string, unknown>): { fields: Record<string, StructValue> } {
  const fields: Record<string, StructValue> = {};
  for (const [k, v] of Object.entries(obj)) fields[k] = toValue(v);
  return { fields };
}

export function fromValue(v: StructValue | undefined): unknown {
  if (!v) return null;
  if ('numberValue' in v) return v.numberValue;
  if ('stringValue' in v) return v.stringValue;
  if ('boolValue' in v) return v.boolValue;
  if ('listValue' in v) return (v.listValue.values ?? []).map(fromValue);
  if ('structValue' in v) return fromStruct(v.structValue);
  return null;
}

export function fromStruct(s: { fields?: Record<string, StructValue> } | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s?.fields ?? {})) out[k] = fromValue(v);
  return out;
}
