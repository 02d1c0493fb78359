import { useId, type ReactNode } from "react";

interface PanelProps {
  title: ReactNode;
  actions?: ReactNode;
  children: ReactNode;
  className?: string;
  testId?: string;
}

/** A titled section; the heading labels the region for screen readers. */
export function Panel({ title, actions, children, className, testId }: PanelProps) {
  const id = useId();
  return (
    <section className={`panel ${className ?? ""}`} aria-labelledby={id} data-testid={testId}>
      <header className="panel__header">
        <h2 id={id} className="panel__title">{title}</h2>
        {actions ? <div className="panel__actions">{actions}</div> : null}
      </header>
      <div className="panel__body">{children}</div>
    </section>
  );
}
