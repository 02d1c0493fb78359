// Filters live in the URL as strings; the API's query parameters are typed by the schema. These turn one
// into the other. A blank value means "no filter"; a value the schema does not allow is dropped, as the
// filter's <select> (which cannot show it) already shows "all".

export function intParam(value: string | null | undefined): number | undefined {
  if (!value) return undefined;
  const number = Number(value);
  return Number.isFinite(number) ? number : undefined;
}

export function boolParam(value: string | null | undefined): boolean | undefined {
  if (value === "true") return true;
  if (value === "false") return false;
  return undefined;
}

/** One allowed value as the one-element list a multiple-choice filter takes (`state=active`). */
export function choiceParam<T extends string>(allowed: readonly T[], value: string | null | undefined): T[] | undefined {
  return value && (allowed as readonly string[]).includes(value) ? [value as T] : undefined;
}

/** A number field's value for a request body: blank is null, a whole number is sent as one, anything else is sent
 * as typed so the server's error names the field (a NaN would go out as JSON null and be taken as "blank"). */
export function integerOrAsTyped(value: string): number | null {
  const trimmed = value.trim();
  if (trimmed === "") return null;
  const parsed = Number(trimmed);
  return (Number.isInteger(parsed) ? parsed : trimmed) as number;
}
