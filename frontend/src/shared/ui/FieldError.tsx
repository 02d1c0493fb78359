/** A form field's errors from the API's `fields` (or the form's own check), read out when they appear. */
export function FieldError({ errors }: { errors?: string[] }) {
  if (!errors?.length) return null;
  return <span className="field__error" role="alert">{errors.join(" ")}</span>;
}
