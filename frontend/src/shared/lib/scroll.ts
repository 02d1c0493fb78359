import type { RefObject } from "react";

/** Bring an element into view on the next frame, e.g. the form a row's "Edit" just filled (on a phone it sits
 * far below the table). */
export function scrollIntoViewSoon(ref: RefObject<HTMLElement | null>) {
  requestAnimationFrame(() => ref.current?.scrollIntoView?.({ block: "nearest", behavior: "smooth" }));
}
