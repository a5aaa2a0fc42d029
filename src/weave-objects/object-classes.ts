// What the Weave trace server derives from an object's value when it stores it
// (weave/trace_server/object_class_util.py and the servers' get_kind):
//   kind               'op' for a serialized op (CustomWeaveType of type "Op"), else 'object'
//   leaf/base classes  from the `_class_name` / `_bases` keys weave.Object and weave.BaseObject
//                      subclasses carry: `_bases` ends with [..., 'Object' | 'BaseObject', 'BaseModel'];
//                      the leaf class is `_class_name`, the base class the first subclass of
//                      Object/BaseObject (`_bases[-3]`, or the leaf itself when it subclasses them directly).

export interface ObjectClasses {
  leafObjectClass: string;
  baseObjectClass: string;
}

const BASE_OBJECT_CLASS_NAMES = new Set(['BaseObject', 'Object']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The classes of a weave.Object-like value, or null for any other value. */
export function objectClassesOf(val: unknown): ObjectClasses | null {
  if (!isRecord(val)) return null;
  const bases = val._bases;
  if (!Array.isArray(bases) || bases.length < 2) return null;
  if (bases[bases.length - 1] !== 'BaseModel') return null;
  if (!BASE_OBJECT_CLASS_NAMES.has(bases[bases.length - 2] as string)) return null;
  const leaf = val._class_name;
  if (typeof leaf !== 'string') return null;
  const base = bases.length > 2 ? bases[bases.length - 3] : leaf;
  return { leafObjectClass: leaf, baseObjectClass: typeof base === 'string' ? base : leaf };
}

/** 'op' for a published op, 'object' for everything else. */
export function objectKindOf(val: unknown): 'op' | 'object' {
  if (isRecord(val) && val._type === 'CustomWeaveType' && isRecord(val.weave_type) && val.weave_type.type === 'Op') return 'op';
  return 'object';
}
