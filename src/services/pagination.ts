// Cursor pagination as the openai client's CursorPage walks it: `after` is an exclusive cursor equal to
// the id of the last item seen, in the order of the current request.

export interface Page<T extends { id: string }> {
  object: 'list';
  data: T[];
  first_id: string;
  last_id: string;
  has_more: boolean;
}

/** Build a page from `limit + 1` fetched rows: the extra row only tells that more exist. */
export function toPage<R, T extends { id: string }>(rows: R[], limit: number, map: (r: R) => T): Page<T> {
  const hasMore = rows.length > limit;
  const data = rows.slice(0, limit).map(map);
  return { object: 'list', data, first_id: data[0]?.id ?? '', last_id: data[data.length - 1]?.id ?? '', has_more: hasMore };
}
