// Filters, sort and page live in the URL, so a filtered view can be shared and Back works.
import { useCallback } from "react";
import { useSearchParams } from "react-router";

export function useUrlState<K extends string>(keys: readonly K[]) {
  const [params, setParams] = useSearchParams();
  const values = Object.fromEntries(keys.map((key) => [key, params.get(key) ?? ""])) as Record<K, string>;
  const update = useCallback(
    (changes: Partial<Record<K, string | number | null>>, options: { resetPage?: boolean } = { resetPage: true }) => {
      setParams(
        (previous) => {
          const next = new URLSearchParams(previous);
          for (const [key, value] of Object.entries(changes) as Array<[string, string | number | null]>) {
            if (value === null || value === "" || value === undefined) next.delete(key);
            else next.set(key, String(value));
          }
          if (options.resetPage && !("page" in changes)) next.delete("page");
          return next;
        },
        { replace: true },
      );
    },
    [setParams],
  );
  return [values, update] as const;
}
