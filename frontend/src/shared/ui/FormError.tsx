// Field errors from the API (`ApiError.fields`), and the rest of a failed write: the message, plus the errors of
// fields the form does not show. Field errors go beside their fields (FieldError); this goes under the form.
import { ApiError } from "@/shared/api/client";

export function fieldErrors(error: unknown): Record<string, string[]> {
  return error instanceof ApiError ? error.fields : {};
}

export function FormError({ error, known }: { error: unknown; known: string[] }) {
  if (!error) return null;
  const fields = fieldErrors(error);
  const rest = Object.entries(fields).filter(([k]) => !known.includes(k)).flatMap(([, v]) => v);
  if (Object.keys(fields).length && !rest.length) return null;
  return <div className="state state--error" role="alert">{[error instanceof Error ? error.message : String(error), ...rest].join(" ")}</div>;
}
