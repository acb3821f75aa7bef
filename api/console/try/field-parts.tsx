/** A field's label (marking it required) and its error, shared by every kind of field. */

export function FieldLabel({ id, name, required }: { id: string; name: string; required: boolean }) {
  return (
    <label for={id}>
      {name}
      {required ? <span class="required"> (required)</span> : null}
    </label>
  );
}

export function FieldError({ id, error }: { id: string; error?: string }) {
  if (!error) return null;
  return (
    <p class="field-error" id={id}>
      {error}
    </p>
  );
}
